"""encode -> our own decode -> encode: the decoded table (Spark's Kafka schema) is valid
encode input, and the round trip is exact. The outside oracles are in test_encode.py;
this checks the two halves of the format layer agree."""
from __future__ import annotations

import random

import pyarrow as pa
import pytest

from spark_kafkalog.format import decode
from spark_kafkalog.format.encode import encode, encode_batches

HEADERS_T = pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string()),
                                                    pa.field("value", pa.binary())])))
NOW = 1_700_000_000_000


def _table(n: int, seed: int) -> pa.Table:
    rng = random.Random(seed)

    def blob(maxlen):
        r = rng.random()
        return None if r < 0.1 else b"" if r < 0.2 else rng.randbytes(rng.randint(1, maxlen))

    headers = []
    for _ in range(n):
        if rng.random() < 0.6:
            headers.append(None)
        else:
            headers.append([{"key": rng.choice(["a", "", "trace-id", "ü"]),
                             "value": blob(30)} for _ in range(rng.randint(0, 3))])
    return pa.table({
        "key": pa.array([blob(20) for _ in range(n)], pa.binary()),
        "value": pa.array([blob(500) for _ in range(n)], pa.binary()),
        "timestamp": pa.array([None if rng.random() < 0.1 else
                               (NOW + rng.randint(-10 ** 6, 10 ** 6)) * 1000
                               for _ in range(n)], pa.timestamp("us", tz="UTC")),
        "headers": pa.array(headers, HEADERS_T),
    })


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_encode_decode_encode(compression):
    table = _table(1500, seed=hash(compression) % 1000)
    data = encode(table, compression=compression, base_offset=500, max_batch_bytes=10_000,
                  now_ms=NOW)
    rows = decode(data, topic="t", partition=3)
    assert rows.num_rows == table.num_rows
    assert rows.column("offset").to_pylist() == list(range(500, 500 + table.num_rows))
    assert rows.column("key").equals(table.column("key").combine_chunks())
    assert rows.column("value").equals(table.column("value").combine_chunks())
    want_ts = [NOW * 1000 if t is None else t
               for t in table.column("timestamp").cast(pa.int64()).to_pylist()]
    assert rows.column("timestamp").cast(pa.int64()).to_pylist() == want_ts
    # an empty header list and a null one both mean "no headers" on the wire
    want_h = [h or None for h in table.column("headers").to_pylist()]
    assert [h or None for h in rows.column("headers").to_pylist()] == want_h
    assert set(rows.column("timestampType").to_pylist()) == {0}

    # the decoded batch (extra columns, Spark's types) is itself valid encode input
    again, index = encode_batches(rows, compression=compression, base_offset=500,
                                  max_batch_bytes=10_000, now_ms=NOW)
    assert again == data
    firsts = index.column("base_offset").to_pylist()
    lasts = index.column("last_offset").to_pylist()
    assert firsts[0] == 500 and lasts[-1] == 499 + table.num_rows
    assert all(f == last + 1 for f, last in zip(firsts[1:], lasts))
