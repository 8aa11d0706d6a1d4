"""format.encode(table, rows=index): records read through a row index must be exactly
the bytes (and batch index) of encoding ``table.take(index)``, for every codec and thread
count, and must read back through kafka-python's decoder (CRC checked)."""
from __future__ import annotations

import importlib
import random

import numpy as np
import pyarrow as pa
import pytest

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.format.encode import encode, encode_batches

kp_records = pytest.importorskip("kafka.record")
hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

HEADERS_T = pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string()),
                                                    pa.field("value", pa.binary())])))
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
NOW = 1_700_000_123_456


def _table(n: int, seed: int) -> pa.Table:
    """Nulls and empties in key/value/header values, null and out-of-order timestamps,
    null/empty/several headers per record."""
    rng = random.Random(seed)

    def blob(maxlen):
        r = rng.random()
        return None if r < 0.1 else b"" if r < 0.2 else rng.randbytes(rng.randint(1, maxlen))

    headers = []
    for _ in range(n):
        r = rng.random()
        headers.append(None if r < 0.5 else [] if r < 0.6 else
                       [{"key": rng.choice(["a", "", "trace-id", "ü"]), "value": blob(30)}
                        for _ in range(rng.randint(1, 3))])
    return pa.table({
        "key": pa.array([blob(20) for _ in range(n)], pa.binary()),
        "value": pa.array([blob(300) for _ in range(n)], pa.binary()),
        "timestamp": pa.array([None if rng.random() < 0.1 else
                               (NOW + rng.randint(-10 ** 6, 10 ** 6)) * 1000
                               for _ in range(n)], pa.timestamp("us", tz="UTC")),
        "headers": pa.array(headers, HEADERS_T),
        "partition": pa.array([rng.randint(0, 3) for _ in range(n)], pa.int32()),
    })


def _same_as_take(table, idx, **kw):
    """encode_batches through ``idx`` == encode_batches of the taken table (bytes and
    batch index). Returns the bytes."""
    data, index = encode_batches(table, rows=idx, now_ms=NOW, **kw)
    want, want_index = encode_batches(table.take(pa.array(np.asarray(idx, np.int64))),
                                      now_ms=NOW, **kw)
    assert data == want
    assert index.equals(want_index)
    assert encode(table, rows=idx, now_ms=NOW, **kw) == want
    return data


def _kafka_python_records(data: bytes):
    out = []
    mr = kp_records.MemoryRecords(data)
    while True:
        batch = mr.next_batch()
        if batch is None:
            break
        assert batch.validate_crc(), f"bad CRC at base offset {batch.base_offset}"
        out.extend((r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers])
                   for r in batch)
    return out


def _expected(table, idx, base_offset):
    ts = table.column("timestamp").cast(pa.int64()).to_pylist()
    keys = table.column("key").to_pylist()
    values = table.column("value").to_pylist()
    headers = table.column("headers").to_pylist()
    return [(base_offset + i, NOW if ts[r] is None else ts[r] // 1000, keys[r], values[r],
             [(h["key"], h["value"]) for h in headers[r] or []])
            for i, r in enumerate(int(r) for r in idx)]


@pytest.mark.parametrize("compression", CODECS)
@pytest.mark.parametrize("threads", [1, 3])
def test_partition_slices_equal_take_and_read_back(compression, threads):
    # What the Spark writer does: a stable counting sort by partition, then one encode
    # per partition slice of the order.
    table = _table(900, seed=7)
    parts = table.column("partition").to_numpy()
    order = np.argsort(parts, kind="stable").astype(np.int64)
    counts = np.bincount(parts, minlength=4)
    start = 0
    for c in counts:
        idx = order[start:start + c]
        data = _same_as_take(table, idx, compression=compression, base_offset=1000,
                             max_batch_bytes=3000, threads=threads)
        assert _kafka_python_records(data) == _expected(table, idx, 1000)
        start += c


@pytest.mark.parametrize("compression", CODECS)
@pytest.mark.parametrize("threads", [1, 2])
def test_shuffled_repeated_and_empty_indexes(compression, threads):
    table = _table(400, seed=3)
    rng = np.random.default_rng(5)
    cases = [
        np.array([], dtype=np.int64),
        np.array([17], dtype=np.int64),
        np.array([5, 5, 5, 0, 399, 5], dtype=np.int64),
        rng.permutation(400),
        rng.integers(0, 400, size=1200),                 # many repeats
        np.arange(399, -1, -1),                          # reversed
    ]
    for idx in cases:
        data = _same_as_take(table, idx, compression=compression, base_offset=7,
                             max_batch_bytes=2000, threads=threads)
        assert _kafka_python_records(data) == _expected(table, idx, 7)


def test_empty_index_gives_no_bytes():
    data, index = encode_batches(_table(10, seed=1), rows=np.array([], np.int64))
    assert data == b"" and index.num_rows == 0


@pytest.mark.parametrize("make", [
    lambda a: a,
    lambda a: a.astype(np.int32),
    lambda a: a.astype(np.uint16),
    lambda a: pa.array(a, pa.int64()),
    lambda a: pa.array(a, pa.int32()),
    lambda a: pa.chunked_array([pa.array(a[:3], pa.int64()), pa.array(a[3:], pa.int64())]),
    lambda a: np.repeat(a, 2)[::2],                      # non-contiguous view
])
def test_index_array_kinds(make):
    table = _table(50, seed=11)
    idx = np.array([3, 1, 49, 0, 0, 20], dtype=np.int64)
    want = encode(table.take(pa.array(idx)), now_ms=NOW)
    assert encode(table, rows=make(idx), now_ms=NOW) == want


def test_sliced_record_batch_and_chunked_columns():
    table = _table(300, seed=21)
    idx = np.array([250, 3, 99, 100, 101, 0, 199], dtype=np.int64)
    sliced = table.slice(50, 220)                        # every column has an offset
    sub = idx[(idx >= 50) & (idx < 270)] - 50
    _same_as_take(sliced, sub, compression="lz4")
    _same_as_take(table.to_batches()[0].slice(50, 220), sub)
    # a table built from many batches, as the writer gets it: chunked columns
    chunked = pa.Table.from_batches(table.to_batches(max_chunksize=37))
    assert chunked.column("value").num_chunks > 1
    data = _same_as_take(chunked, idx, compression="zstd", threads=2, max_batch_bytes=500)
    assert _kafka_python_records(data) == _expected(table, idx, 0)


def test_record_batch_input():
    batch = _table(80, seed=2).to_batches()[0]
    idx = np.array([79, 0, 40, 40], dtype=np.int64)
    assert encode(batch, rows=idx, now_ms=NOW) == \
        encode(batch.take(pa.array(idx)), now_ms=NOW)


def test_rows_not_selected_are_not_checked():
    # a negative timestamp (rejected) in a row the index skips does not matter ...
    table = pa.table({"value": [b"a", b"b", b"c"],
                      "timestamp": pa.array([5, -2, 7], pa.int64())})
    assert encode(table, rows=np.array([2, 0]), now_ms=NOW) == \
        encode(table.take([2, 0]), now_ms=NOW)
    # ... in one it selects, the error names the table's row, not the output position
    with pytest.raises(InvalidOptionError, match=r"timestamp.*-2 ms at row 1\b"):
        encode(table, rows=np.array([2, 0, 1]), now_ms=NOW)


def test_null_header_key_names_table_row():
    table = pa.table({"value": [b"a", b"b"],
                      "headers": pa.array([None, [{"key": None, "value": b"x"}]],
                                          HEADERS_T)})
    with pytest.raises(InvalidOptionError, match=r"headers.*row 1\b"):
        encode(table, rows=np.array([0, 0, 1]))


@pytest.mark.parametrize("idx,match", [
    (np.array([0, 3]), r"rows=\[1\] is 3, outside .* 3 rows"),
    (np.array([0, -1]), r"rows=\[1\] is -1"),
    (np.array([2 ** 63 + 5], dtype=np.uint64), r"rows=\[0\]"),
    (pa.array([0, None], pa.int64()), "null"),
    (pa.array([0, 1], pa.int16()), "int32 or int64"),
    (np.array([[0, 1]]), "one-dimensional"),
    (np.array([0.0, 1.0]), "integer"),
    (np.array([True, False]), "integer"),
    ([0, 1], "numpy integer array"),
])
def test_bad_index_rejected_before_any_work(idx, match, monkeypatch):
    # (the package's `encode` attribute is the function: look the module up)
    enc_mod = importlib.import_module("spark_kafkalog.format.encode_columns")

    def no_work(*args, **kwargs):
        raise AssertionError("column normalisation ran before the index was checked")

    monkeypatch.setattr(enc_mod, "_column", no_work)
    table = pa.table({"value": [b"a", b"b", b"c"]})
    with pytest.raises(InvalidOptionError, match=match):
        encode(table, rows=idx)


def test_index_into_empty_table():
    table = pa.table({"value": pa.array([], pa.binary())})
    assert encode(table, rows=np.array([], np.int64)) == b""
    with pytest.raises(InvalidOptionError, match="outside"):
        encode(table, rows=np.array([0]))


# ---- hypothesis -----------------------------------------------------------------------------
_blob = st.one_of(st.none(), st.binary(max_size=200))
_header = st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=30)))
_row = st.tuples(_blob, _blob, st.one_of(st.none(), st.integers(0, 2 ** 50)),
                 st.one_of(st.none(), st.lists(_header, max_size=3)))


@st.composite
def _table_and_index(draw):
    rows = draw(st.lists(_row, min_size=1, max_size=50))
    idx = draw(st.lists(st.integers(0, len(rows) - 1), max_size=120))
    table = pa.table({
        "key": pa.array([r[0] for r in rows], pa.binary()),
        "value": pa.array([r[1] for r in rows], pa.binary()),
        "timestamp": pa.array([r[2] for r in rows], pa.timestamp("ms", tz="UTC")),
        "headers": pa.array([None if r[3] is None else
                             [{"key": k, "value": v} for k, v in r[3]] for r in rows],
                            HEADERS_T),
    })
    chunk = draw(st.sampled_from([None, 1, 7]))
    if chunk is not None:
        table = pa.Table.from_batches(table.to_batches(max_chunksize=chunk), table.schema)
    return table, np.array(idx, dtype=np.int64)


@hypothesis.settings(max_examples=120, deadline=None)
@hypothesis.given(ti=_table_and_index(), compression=st.sampled_from(CODECS),
                  threads=st.sampled_from([1, 2, 4]),
                  max_batch_bytes=st.sampled_from([62, 300, 5000, 1 << 20]),
                  base_offset=st.integers(0, 2 ** 62))
def test_hypothesis_index_equals_take(ti, compression, threads, max_batch_bytes,
                                      base_offset):
    table, idx = ti
    data = _same_as_take(table, idx, compression=compression, threads=threads,
                         max_batch_bytes=max_batch_bytes, base_offset=base_offset)
    got = _kafka_python_records(data)
    want = [(base_offset + i, NOW if t is None else t, k, v, h)
            for i, (_, t, k, v, h) in enumerate(_expected_ms(table, idx))]
    assert got == want


def _expected_ms(table, idx):
    ts = table.column("timestamp").cast(pa.int64()).to_pylist()
    keys = table.column("key").to_pylist()
    values = table.column("value").to_pylist()
    headers = table.column("headers").to_pylist()
    return [(i, ts[r], keys[r], values[r],
             [(h["key"], h["value"]) for h in headers[r] or []])
            for i, r in enumerate(int(r) for r in idx)]


# ---- chunked tables (a table built from many record batches) -----------------------------------
def _rechunk(col, sizes):
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    out, pos = [], 0
    for m in sizes:
        out.append(col.slice(pos, m))
        pos += m
    out.append(col.slice(pos))
    return pa.chunked_array(out, col.type)


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_chunks_read_in_place(compression, monkeypatch):
    # Alike-chunked columns (empty chunks included) are read chunk by chunk: nothing is
    # combined. Every index kind: in order, sorted runs, shuffled (searches), repeats.
    table = _table(500, seed=31)
    sizes = [0, 1, 120, 0, 7, 200]                   # + the rest (172 rows)
    chunked = pa.table({name: _rechunk(table.column(name), sizes)
                        for name in table.column_names})
    enc_mod = importlib.import_module("spark_kafkalog.format.encode_columns")

    def no_combine(*args, **kwargs):
        raise AssertionError("alike-chunked columns were combined")

    rng = np.random.default_rng(9)
    cases = [None, np.arange(500), np.sort(rng.integers(0, 500, 300)),
             rng.permutation(500), np.array([499, 0, 499, 128, 127, 128])]
    want = {}
    for k, idx in enumerate(cases):
        taken = table if idx is None else table.take(pa.array(idx))
        want[k] = encode_batches(taken, compression=compression, now_ms=NOW,
                                 max_batch_bytes=1500)
    monkeypatch.setattr(enc_mod, "one_chunk", no_combine)
    for k, idx in enumerate(cases):
        for threads in (1, 3):
            data, index = encode_batches(chunked, rows=idx, compression=compression,
                                         now_ms=NOW, max_batch_bytes=1500, threads=threads)
            assert data == want[k][0]
            assert index.equals(want[k][1])


def test_unlike_chunked_columns_are_combined():
    table = _table(300, seed=41)
    mixed = pa.table({
        "key": _rechunk(table.column("key"), [10, 100]),
        "value": _rechunk(table.column("value"), [150]),
        "timestamp": table.column("timestamp"),
        "headers": _rechunk(table.column("headers"), [1, 1, 1]),
    })
    idx = np.random.default_rng(2).integers(0, 300, 400)
    data = _same_as_take(mixed, idx, compression="lz4", max_batch_bytes=2000)
    assert data == encode(table.take(pa.array(idx)), compression="lz4", now_ms=NOW,
                          max_batch_bytes=2000)


def test_chunks_with_different_dictionaries_and_types():
    # dictionary chunks with different dictionaries; string values; int32 epoch-ms
    v = pa.chunked_array([pa.array(["x", "y", "x"]).dictionary_encode(),
                          pa.array(["zz", "x"]).dictionary_encode()])
    k = pa.chunked_array([pa.array(["a", None, "c"], pa.large_string()),
                          pa.array(["d", ""], pa.large_string())])
    ts = pa.chunked_array([pa.array([1, None, 3], pa.int32()), pa.array([4, 5], pa.int32())])
    table = pa.table({"value": v, "key": k, "timestamp": ts})
    idx = np.array([4, 0, 3, 1, 2, 3])
    got = _kafka_python_records(encode(table, rows=idx, now_ms=NOW))
    vals = ["x", "y", "x", "zz", "x"]
    keys = ["a", None, "c", "d", ""]
    tss = [1, None, 3, 4, 5]
    assert [(o, t, kk, vv) for o, t, kk, vv, _ in got] == [
        (i, NOW if tss[r] is None else tss[r], None if keys[r] is None else keys[r].encode(),
         vals[r].encode()) for i, r in enumerate(idx)]


def test_bad_row_in_later_chunk_names_table_row():
    table = pa.table({"value": pa.chunked_array([pa.array([b"a", b"b"]),
                                                 pa.array([b"c", b"d"])]),
                      "timestamp": pa.chunked_array([pa.array([1, 2], pa.int64()),
                                                     pa.array([3, -4], pa.int64())])})
    with pytest.raises(InvalidOptionError, match=r"-4 ms at row 3\b"):
        encode(table)
    with pytest.raises(InvalidOptionError, match=r"-4 ms at row 3\b"):
        encode(table, rows=np.array([0, 3]))
