"""``offsets="preserve"``: records keep given offsets (gaps, int32-overflowing deltas) and
LogAppendTime, checked with kafka-python and aiokafka (outside oracles) and against the
batch headers Kafka's rules ask for."""
from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from spark_kafkalog.errors import BadRowError, InvalidOptionError
from spark_kafkalog.format import decode
from spark_kafkalog.format.encode import encode, encode_batches, encode_partitioned
from tests.format.test_encode import (
    CODECS,
    NOW,
    headers_of,
    read_aiokafka,
    read_kafka_python,
    sample_table,
)


def _with_offsets(n: int, seed: int, *, lat_share: float = 0.3, huge_gap: bool = True):
    """sample_table plus strictly increasing offsets with gaps (some > int32) and a
    timestampType column (LogAppendTime runs sharing one timestamp)."""
    table, expect = sample_table(n, seed)
    rng = random.Random(seed + 1)
    offs, types, ts = [], [], []
    o = rng.randint(0, 50)
    lat_ts = None
    for i in range(n):
        offs.append(o)
        gap = rng.choice([1, 1, 1, 2, 7, 300])
        if huge_gap and i == n // 2:
            gap = 2 ** 31 + 5            # a delta no batch can hold
        o += gap
        if rng.random() < lat_share:
            if lat_ts is None or rng.random() < 0.3:
                lat_ts = NOW + rng.randint(0, 10 ** 6)
            types.append(1)
            ts.append(lat_ts)
        else:
            types.append(0)
            ts.append(expect[i][2])
    table = table.set_column(table.schema.get_field_index("timestamp"), "timestamp",
                             pa.array(ts, pa.timestamp("ms", tz="UTC")))
    table = table.append_column("offset", pa.array(offs, pa.int64()))
    table = table.append_column("timestampType", pa.array(types, pa.int32()))
    want = [(off, t, tt, k, v, h) for off, t, tt, (k, v, _, h) in zip(offs, ts, types, expect)]
    return table, want


def _check(data: bytes, want):
    kp = read_kafka_python(data)
    aio = read_aiokafka(data)
    got = [r for _, recs in kp for r in recs]
    assert got == [r for _, recs in aio for r in recs]
    assert got == want
    for batch, recs in kp:
        assert batch.base_offset == recs[0][0]
        assert batch.last_offset_delta == recs[-1][0] - recs[0][0]
        assert batch.records_count == len(recs)
        types = {r[2] for r in recs}
        assert types == {batch.timestamp_type}
        if batch.timestamp_type == 1:
            # one timestamp per LogAppendTime batch, in maxTimestamp as a broker writes it
            assert {r[1] for r in recs} == {batch.max_timestamp}
            assert batch.first_timestamp == batch.max_timestamp


@pytest.mark.parametrize("compression", CODECS)
def test_preserved_offsets_and_timestamp_types(compression):
    table, want = _with_offsets(700, seed=len(compression))
    data, index = encode_batches(table, offsets="preserve", compression=compression,
                                 max_batch_bytes=6000, now_ms=NOW)
    _check(data, want)
    hdrs = headers_of(data)
    assert index.column("base_offset").to_pylist() == [h["base_offset"] for h in hdrs]
    assert index.column("last_offset").to_pylist() == [
        h["base_offset"] + h["last_offset_delta"] for h in hdrs]
    assert [h["attributes"] & 0x08 for h in hdrs] == [
        8 if b.timestamp_type == 1 else 0 for b, _ in read_kafka_python(data)]
    # our own decoder agrees (timestamp type and offsets), and a decoded table goes back
    rows = decode(data, topic="t", partition=0)
    assert rows.column("offset").to_pylist() == [w[0] for w in want]
    assert rows.column("timestampType").to_pylist() == [w[2] for w in want]
    again = encode(rows, offsets="preserve", compression=compression,
                   max_batch_bytes=6000)
    assert decode(again, topic="t", partition=0).equals(rows)


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_rows_selection_keeps_the_rows_offsets(compression):
    table, want = _with_offsets(300, seed=5)
    rows = np.arange(0, 300, 3)
    data, _ = encode_batches(table, rows=rows, offsets="preserve", compression=compression)
    _check(data, [want[i] for i in rows])


@pytest.mark.parametrize("compression", CODECS)
def test_partitioned_preserve(compression):
    table, want = _with_offsets(900, seed=11, huge_gap=False)
    rng = np.random.default_rng(3)
    parts = rng.integers(0, 4, 900).astype(np.int32)
    data, sections = encode_partitioned(table, parts, 4, offsets="preserve",
                                        compression=compression, max_batch_bytes=5000)
    for p, start, end, index in sections:
        chunk = data[start:end]
        _check(chunk, [w for w, q in zip(want, parts) if q == p])
        assert index.column("last_offset").to_pylist() == [
            b.last_offset for b, _ in read_kafka_python(chunk)]
        alone, _ = encode_batches(table, rows=np.flatnonzero(parts == p),
                                  offsets="preserve", compression=compression,
                                  max_batch_bytes=5000)
        assert compression != "none" or alone == chunk


def test_non_increasing_offsets_name_the_rows():
    t = pa.table({"value": [b"a", b"b", b"c"], "offset": pa.array([4, 9, 9], pa.int64())})
    with pytest.raises(BadRowError, match=r"^offsets must increase strictly, but offset 9 "
                                          r"\(row 2\) comes after offset 9 \(row 1\)"):
        encode(t, offsets="preserve")
    with pytest.raises(BadRowError, match=r"^partition 0: offsets must increase strictly, "
                                          r"but offset 9 \(row 2\) comes after offset 9 "
                                          r"\(row 0\)"):
        encode_partitioned(pa.table({"value": [b"a", b"b", b"c"],
                                     "offset": pa.array([9, 1, 9], pa.int64())}),
                           np.array([0, 1, 0]), 2, offsets="preserve")
    # per partition: 9 then 1 in different partitions is fine
    encode_partitioned(pa.table({"value": [b"a", b"b"], "offset": pa.array([9, 1])}),
                       np.array([0, 1]), 2, offsets="preserve")


def test_bad_offset_columns():
    with pytest.raises(InvalidOptionError, match="needs an 'offset' column"):
        encode(pa.table({"value": [b"a"]}), offsets="preserve")
    with pytest.raises(BadRowError, match="null offset at row 1"):
        encode(pa.table({"value": [b"a", b"b"], "offset": pa.array([1, None], pa.int64())}),
               offsets="preserve")
    with pytest.raises(BadRowError, match="negative offset -3 at row 0"):
        encode(pa.table({"value": [b"a"], "offset": pa.array([-3], pa.int64())}),
               offsets="preserve")
    with pytest.raises(BadRowError, match="timestampType.*7 at row 0"):
        encode(pa.table({"value": [b"a"], "offset": pa.array([3], pa.int64()),
                         "timestampType": pa.array([7], pa.int32())}), offsets="preserve")
    with pytest.raises(InvalidOptionError, match="base_offset cannot"):
        encode(pa.table({"value": [b"a"], "offset": pa.array([3], pa.int64())}),
               offsets="preserve", base_offset=5)
    with pytest.raises(InvalidOptionError, match="offsets must be one of"):
        encode(pa.table({"value": [b"a"]}), offsets="keep")
