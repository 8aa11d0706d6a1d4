"""format/rebuild: batches rebuilt as Kafka's cleaner rebuilds them, checked by kafka-python
(an independent reader): header fields kept, offsets with gaps, delete horizon as
baseTimestamp, LogAppendTime kept, every codec; empty and re-based control batches."""
from __future__ import annotations

import numpy as np
import pytest
from kafka.record.default_records import DefaultRecordBatch

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.format import decode, scan_headers
from spark_kafkalog.format.rebuild import empty_batch, rebase_control_batch, rebuild_batches
from tests.log.logbuilder import CODECS, encode_control_batch, encode_v2_batch

RECS = [(i, 1000 + 7 * i, b"k%d" % i, None if i == 3 else b"v%d" % i * (i + 1),
         [("h", b"x%d" % i)] if i % 2 else []) for i in range(10)]


def fields_of(raw: bytes, **over) -> dict:
    h = scan_headers(raw).headers.to_pylist()[0]
    f = {"base_offset": h["base_offset"], "last_offset": h["last_offset"],
         "attributes": h["attributes"], "base_timestamp": h["first_timestamp"],
         "max_timestamp": h["max_timestamp"], "producer_id": h["producer_id"],
         "producer_epoch": h["producer_epoch"], "base_sequence": h["base_sequence"],
         "leader_epoch": h["partition_leader_epoch"]}
    f.update(over)
    return {k: [v] for k, v in f.items()}


@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize("horizon", [False, True])
def test_rebuilt_batch_reads_back_in_kafka_python(codec, horizon):
    raw = encode_v2_batch(RECS, base_offset=500, compression=codec, producer_id=9,
                          producer_epoch=2, base_sequence=40, transactional=True,
                          leader_epoch=4)
    rows = decode(raw)
    keep = np.array([0, 3, 4, 9])
    f = fields_of(raw)
    if horizon:
        f["attributes"] = [f["attributes"][0] | 0x40]
        f["base_timestamp"] = [99_000]
    [out] = rebuild_batches(rows, keep, np.array([0, 4]),
                            rows.column("offset").to_numpy()[keep] - 500, f)
    b = DefaultRecordBatch(bytearray(out))
    assert b.validate_crc()
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (9, 2, 40)
    assert b.is_transactional and b.compression_type == CODECS[codec]
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in b]
    want = [(500 + d, ts, k, v, h) for d, ts, k, v, h in (RECS[i] for i in keep)]
    assert got == want
    h = scan_headers(out, verify_crc=True).headers.to_pylist()[0]
    assert h["last_offset"] == 509 and h["record_count"] == 4
    assert h["partition_leader_epoch"] == 4
    assert h["first_timestamp"] == (99_000 if horizon else 1000)
    assert h["max_timestamp"] == 1000 + 7 * 9


def test_log_append_time_keeps_its_max_timestamp():
    raw = encode_v2_batch(RECS, base_offset=0, log_append_time=5_555)
    rows = decode(raw)
    keep = np.array([1, 2])
    [out] = rebuild_batches(rows, keep, np.array([0, 2]), np.array([1, 2]), fields_of(raw))
    assert decode(out).column("timestamp").cast("int64").to_pylist() == [5_555_000] * 2
    assert scan_headers(out).headers.column("max_timestamp").to_pylist() == [5_555]


def test_batches_keep_their_own_codecs_and_order():
    recs = [(d, ts, k, b"compressible " * 20, h) for d, ts, k, _, h in RECS[:5]]
    raws = [encode_v2_batch(recs, base_offset=10 * i, compression=c)
            for i, c in enumerate(["zstd", "none", "gzip"])]
    rows = decode(b"".join(raws))
    keep = np.array([0, 4, 6, 12, 13])
    f = {k: sum((fields_of(r)[k] for r in raws), []) for k in fields_of(raws[0])}
    out = rebuild_batches(rows, keep, np.array([0, 2, 3, 5]),
                          rows.column("offset").to_numpy()[keep] % 10, f)
    assert [scan_headers(o).headers.column("codec")[0].as_py() for o in out] == [4, 0, 1]
    assert decode(b"".join(out)).column("offset").to_pylist() == [0, 4, 11, 22, 23]


def test_empty_and_control_batches():
    e = empty_batch(base_offset=5, last_offset=9, attributes=0x10 | 0x03, timestamp=777,
                    producer_id=1, producer_epoch=0, base_sequence=3, leader_epoch=2)
    h = scan_headers(e, verify_crc=True).headers.to_pylist()[0]
    assert (h["base_offset"], h["last_offset"], h["record_count"], h["codec"]) == (5, 9, 0, 0)
    assert h["is_transactional"] and h["max_timestamp"] == h["first_timestamp"] == 777
    c = encode_control_batch(base_offset=50, producer_id=7, producer_epoch=1, commit=False,
                             timestamp=1234, coordinator_epoch=3)
    c2 = rebase_control_batch(c, 99_999)
    h = scan_headers(c2, verify_crc=True).headers.to_pylist()[0]
    assert h["attributes"] & 0x40 and h["first_timestamp"] == 99_999
    assert h["control_type"] == 0 and h["is_control"]
    b = DefaultRecordBatch(bytearray(c2))
    assert b.validate_crc()
    [r] = list(b)
    assert (r.offset, r.timestamp) == (50, 1234)
    with pytest.raises(InvalidOptionError, match="not a v2 control batch"):
        rebase_control_batch(encode_v2_batch(RECS[:1], base_offset=0), 1)


def test_bad_layouts_are_refused():
    raw = encode_v2_batch(RECS, base_offset=0)
    rows = decode(raw)
    with pytest.raises(InvalidOptionError, match="starts"):
        rebuild_batches(rows, np.array([0, 1]), np.array([0, 1]), np.array([0, 1]),
                        fields_of(raw))
    with pytest.raises(InvalidOptionError, match="offset delta"):
        rebuild_batches(rows, np.array([0, 1]), np.array([0, 2]), np.array([0, -1]),
                        fields_of(raw))
