"""format.encode: our v2 batches, read back by the outside oracles (kafka-python's and
aiokafka's decoders, CRC checked), batch sizing, column types, timestamps, errors."""
from __future__ import annotations

import datetime as dt
import random
import struct

import pyarrow as pa
import pytest

from spark_kafkalog.errors import InvalidOptionError, KafkaLogError
from spark_kafkalog.format import _encode as _kernel
from spark_kafkalog.format import codecs, decode
from spark_kafkalog.format.encode import (
    BATCH_INDEX_SCHEMA,
    encode,
    encode_batches,
    encode_varint,
    encode_varlong,
    varint_size,
    varlong_size,
)
from spark_kafkalog.format.wire import V2_HEADER, V2_HEADER_SIZE

kp_records = pytest.importorskip("kafka.record")
aio_records = pytest.importorskip("aiokafka.record.memory_records")

HEADER_T = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS_T = pa.list_(pa.field("element", HEADER_T))
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
NOW = 1_700_000_123_456


# ---- oracles ---------------------------------------------------------------------------------
def read_kafka_python(data: bytes):
    """[(batch, [(offset, ts, ts_type, key, value, headers)])] via kafka-python, CRCs
    validated."""
    out = []
    mr = kp_records.MemoryRecords(data)
    while True:
        batch = mr.next_batch()
        if batch is None:
            break
        assert batch.validate_crc(), f"kafka-python: bad CRC at base offset {batch.base_offset}"
        recs = [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value,
                 [(k, v) for k, v in r.headers]) for r in batch]
        out.append((batch, recs))
    return out


def read_aiokafka(data: bytes):
    out = []
    mr = aio_records.MemoryRecords(data)
    while mr.has_next():
        batch = mr.next_batch()
        assert batch.validate_crc(), f"aiokafka: bad CRC at base offset {batch.base_offset}"
        recs = [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value,
                 [(k, v) for k, v in r.headers]) for r in batch]
        out.append((batch, recs))
    return out


def records_of(data: bytes):
    """Both oracles must agree; returns the flat record list."""
    kp = [r for _, recs in read_kafka_python(data) for r in recs]
    aio = [r for _, recs in read_aiokafka(data) for r in recs]
    assert kp == aio
    return kp


def headers_of(data: bytes):
    """Every batch header, parsed with wire.V2_HEADER: list of dicts."""
    names = ["base_offset", "length", "leader_epoch", "magic", "crc", "attributes",
             "last_offset_delta", "base_ts", "max_ts", "producer_id", "producer_epoch",
             "base_sequence", "count"]
    out = []
    pos = 0
    while pos < len(data):
        h = dict(zip(names, V2_HEADER.unpack_from(data, pos)))
        h["position"] = pos
        h["size"] = 12 + h["length"]
        out.append(h)
        pos += h["size"]
    assert pos == len(data)
    return out


def sample_table(n: int, seed: int = 0, *, key_type=pa.binary(), value_type=pa.binary()):
    rng = random.Random(seed)
    keys, values, ts, hdrs, expect = [], [], [], [], []
    for i in range(n):
        k = None if rng.random() < 0.1 else (b"" if rng.random() < 0.1 else
                                             rng.randbytes(rng.randint(1, 40)))
        v = None if rng.random() < 0.1 else (b"" if rng.random() < 0.1 else
                                             rng.randbytes(rng.randint(1, 300)))
        if key_type in (pa.string(), pa.large_string()) and k is not None:
            k = k.hex().encode()
        if value_type in (pa.string(), pa.large_string()) and v is not None:
            v = v.hex().encode()
        t = None if rng.random() < 0.05 else NOW - rng.randint(-5000, 10 ** 9)
        h = None if rng.random() < 0.5 else [
            (f"h{j}-{rng.randint(0, 9)}", None if rng.random() < 0.2 else rng.randbytes(
                rng.randint(0, 20))) for j in range(rng.randint(0, 3))]
        keys.append(k)
        values.append(v)
        ts.append(t)
        hdrs.append(h)
        expect.append((k, v, NOW if t is None else t, list(h or [])))

    def conv(items, t):
        if t in (pa.string(), pa.large_string()):
            return pa.array([None if x is None else x.decode() for x in items], t)
        return pa.array(items, t)

    table = pa.table({
        "key": conv(keys, key_type),
        "value": conv(values, value_type),
        "timestamp": pa.array(ts, pa.timestamp("ms", tz="UTC")),
        "headers": pa.array([None if h is None else [{"key": a, "value": b} for a, b in h]
                             for h in hdrs], HEADERS_T),
    })
    return table, expect


def check_records(data: bytes, expect, base_offset: int = 0):
    got = records_of(data)
    assert len(got) == len(expect)
    for i, ((off, ts, ts_type, k, v, h), (ek, ev, ets, eh)) in enumerate(zip(got, expect)):
        assert off == base_offset + i
        assert ts_type == 0                  # CreateTime
        assert (k, v, ts, h) == (ek, ev, ets, eh), i


# ---- round trips through both oracles -------------------------------------------------------
@pytest.mark.parametrize("compression", CODECS)
def test_every_codec_read_back_exactly(compression):
    table, expect = sample_table(700, seed=1)
    data, index = encode_batches(table, compression=compression, base_offset=1000,
                                 max_batch_bytes=8000, now_ms=NOW)
    check_records(data, expect, base_offset=1000)
    batches = read_kafka_python(data)
    assert len(batches) > 3
    for batch, _ in batches:
        assert batch.compression_type == CODEC_IDS[compression]
        assert batch.magic == 2
        assert not batch.is_transactional and not batch.is_control_batch
    check_index(data, index)


@pytest.mark.parametrize("compression", CODECS)
def test_batch_header_fields_as_java_producer_writes(compression):
    table, _ = sample_table(50, seed=2)
    data = encode(table, compression=compression, base_offset=7, now_ms=NOW)
    (h,) = headers_of(data)
    assert h["magic"] == 2
    assert h["attributes"] == CODEC_IDS[compression]      # CreateTime, not txn/control
    assert (h["producer_id"], h["producer_epoch"], h["base_sequence"]) == (-1, -1, -1)
    assert h["leader_epoch"] == -1
    assert h["base_offset"] == 7 and h["last_offset_delta"] == 49 and h["count"] == 50
    ts = table.column("timestamp").cast(pa.int64()).to_pylist()
    ts = [NOW if t is None else t for t in ts]
    assert h["base_ts"] == ts[0] and h["max_ts"] == max(ts)


def test_partition_leader_epoch_is_outside_the_crc():
    table, expect = sample_table(20, seed=3)
    data = encode(table, partition_leader_epoch=42, now_ms=NOW)
    assert headers_of(data)[0]["leader_epoch"] == 42
    check_records(data, expect)


def check_index(data: bytes, index: pa.Table):
    assert index.schema == BATCH_INDEX_SCHEMA
    rows = index.to_pylist()
    parsed = headers_of(data)
    assert len(rows) == len(parsed)
    by_kp = read_kafka_python(data)
    for row, h, (batch, recs) in zip(rows, parsed, by_kp):
        assert row["position"] == h["position"] and row["size"] == h["size"]
        assert row["base_offset"] == h["base_offset"]
        assert row["last_offset"] == h["base_offset"] + h["last_offset_delta"]
        assert row["record_count"] == h["count"] == len(recs)
        assert row["first_timestamp"] == h["base_ts"] == recs[0][1]
        assert row["max_timestamp"] == h["max_ts"] == max(r[1] for r in recs)
        first_max = next(r[0] for r in recs if r[1] == row["max_timestamp"])
        assert row["offset_of_max_timestamp"] == first_max


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_threads_do_not_change_the_bytes(compression):
    table, expect = sample_table(3000, seed=4)
    one, idx1 = encode_batches(table, compression=compression, max_batch_bytes=4096,
                               now_ms=NOW, threads=1)
    three, idx3 = encode_batches(table, compression=compression, max_batch_bytes=4096,
                                 now_ms=NOW, threads=3)
    assert one == three and idx1.equals(idx3)
    check_records(three, expect)


# ---- batch sizing -----------------------------------------------------------------------------
@pytest.mark.parametrize("max_batch_bytes", [62, 200, 1000, 4096, 16384, 1 << 20])
def test_batches_are_full_but_within_bound(max_batch_bytes):
    table, expect = sample_table(400, seed=5)
    data, index = encode_batches(table, max_batch_bytes=max_batch_bytes, now_ms=NOW)
    check_records(data, expect)
    rows = index.to_pylist()
    for i, row in enumerate(rows):
        # only a record that alone is larger than the bound may exceed it, on its own
        assert row["size"] <= max_batch_bytes or row["record_count"] == 1
        if i + 1 < len(rows):
            # greedy: the batch plus the next record would not have fit
            nxt = table.slice(row["base_offset"], row["record_count"] + 1)
            grown = encode(nxt, max_batch_bytes=1 << 30, now_ms=NOW)
            assert len(grown) > max_batch_bytes
    assert sum(r["record_count"] for r in rows) == table.num_rows


def test_oversized_single_record_gets_own_batch():
    big = b"x" * 50_000
    table = pa.table({"value": pa.array([b"a", big, b"b", b"c"])})
    data, index = encode_batches(table, max_batch_bytes=1000, now_ms=NOW)
    counts = index.column("record_count").to_pylist()
    sizes = index.column("size").to_pylist()
    assert counts == [1, 1, 2]
    assert sizes[1] > 50_000 and sizes[0] <= 1000 and sizes[2] <= 1000
    assert [r[4] for r in records_of(data)] == [b"a", big, b"b", b"c"]


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_never_exceed_bound(compression):
    # incompressible values: codec framing makes "compressed" larger than the input,
    # so batches planned to the uncompressed bound get split
    rng = random.Random(6)
    values = [rng.randbytes(rng.randint(50, 400)) for _ in range(300)]
    table = pa.table({"value": pa.array(values)})
    data, index = encode_batches(table, compression=compression, max_batch_bytes=3000,
                                 now_ms=NOW)
    assert all(s <= 3000 for s in index.column("size").to_pylist())
    assert [r[4] for r in records_of(data)] == values
    check_index(data, index)


def test_compressed_plan_uses_uncompressed_size():
    # compressible records: same batch boundaries as without compression
    table = pa.table({"value": pa.array([b"abc" * 30] * 500)})
    _, plain = encode_batches(table, max_batch_bytes=5000, now_ms=NOW)
    for compression in ["gzip", "snappy", "lz4", "zstd"]:
        _, packed = encode_batches(table, compression=compression, max_batch_bytes=5000,
                                   now_ms=NOW)
        assert packed.column("record_count").equals(plain.column("record_count"))


def test_empty_input():
    data, index = encode_batches(pa.table({"value": pa.array([], pa.binary())}))
    assert data == b"" and index.num_rows == 0 and index.schema == BATCH_INDEX_SCHEMA
    assert encode(pa.table({"value": pa.array([], pa.binary())}), compression="zstd") == b""


# ---- column types ---------------------------------------------------------------------------------
@pytest.mark.parametrize("key_type,value_type", [
    (pa.binary(), pa.binary()), (pa.string(), pa.string()),
    (pa.large_binary(), pa.large_string()), (pa.large_string(), pa.binary())])
def test_string_and_binary_columns(key_type, value_type):
    table, expect = sample_table(200, seed=7, key_type=key_type, value_type=value_type)
    check_records(encode(table, now_ms=NOW), expect)


def test_null_versus_empty():
    table = pa.table({"key": pa.array([None, b"", b"k", None], pa.binary()),
                      "value": pa.array([b"", None, None, b"v"], pa.binary()),
                      "headers": pa.array([None, [], [{"key": "", "value": b""}],
                                           [{"key": "n", "value": None}]], HEADERS_T)})
    got = records_of(encode(table, compression="lz4", now_ms=NOW))
    assert [(r[3], r[4], r[5]) for r in got] == [
        (None, b"", []), (b"", None, []), (b"k", None, [("", b"")]), (None, b"v", [("n", None)])]


def test_only_value_column_and_extra_columns_ignored():
    table = pa.table({"value": pa.array([b"a", b"b"]), "topic": pa.array(["t", "t"]),
                      "partition": pa.array([0, 0], pa.int32()),
                      "offset": pa.array([99, 100], pa.int64())})
    got = records_of(encode(table, base_offset=5, now_ms=NOW))
    assert [(r[0], r[1], r[3], r[4], r[5]) for r in got] == [(5, NOW, None, b"a", []),
                                                             (6, NOW, None, b"b", [])]


def test_sliced_chunked_and_dictionary_columns():
    table, expect = sample_table(300, seed=8)
    # a sliced RecordBatch: every array has a non-zero offset
    batch = table.to_batches()[0].slice(37, 200)
    check_records(encode(batch, now_ms=NOW), expect[37:237])
    # many chunks per column
    chunked = pa.concat_tables([table.slice(i, 50) for i in range(0, 300, 50)])
    assert chunked.column("value").num_chunks == 6
    check_records(encode(chunked, now_ms=NOW), expect)
    # dictionary-encoded value, fixed-size binary key, binary_view value
    t2 = pa.table({"key": pa.array([b"ab", b"cd", None], pa.binary(2)),
                   "value": pa.array(["x", "y", "x"]).dictionary_encode()})
    got = records_of(encode(t2, now_ms=NOW))
    assert [(r[3], r[4]) for r in got] == [(b"ab", b"x"), (b"cd", b"y"), (None, b"x")]
    # chunks with different dictionaries
    t4 = pa.table({"value": pa.chunked_array([pa.array(["a", "b"]).dictionary_encode(),
                                              pa.array(["c"]).dictionary_encode()])})
    assert [r[4] for r in records_of(encode(t4, now_ms=NOW))] == [b"a", b"b", b"c"]
    t3 = pa.table({"value": pa.array([b"p", None, b"q" * 40], pa.binary_view())})
    assert [r[4] for r in records_of(encode(t3, now_ms=NOW))] == [b"p", None, b"q" * 40]


def test_null_typed_key_column():
    table = pa.table({"key": pa.nulls(2), "value": pa.array([b"a", b"b"])})
    assert [r[3] for r in records_of(encode(table, now_ms=NOW))] == [None, None]


def test_headers_variants():
    lt = pa.large_list(pa.field("item", pa.struct([pa.field("key", pa.large_string()),
                                                   pa.field("value", pa.large_binary())])))
    hdr = [[{"key": "a", "value": b"1"}, {"key": "b", "value": None}], None, [],
           [{"key": "ключ", "value": b""}]]
    table = pa.table({"value": pa.array([b"v"] * 4), "headers": pa.array(hdr, lt)})
    got = records_of(encode(table, now_ms=NOW))
    assert [r[5] for r in got] == [[("a", b"1"), ("b", None)], [], [], [("ключ", b"")]]
    # binary header keys, sliced headers list
    bt = pa.list_(pa.struct([pa.field("key", pa.binary()), pa.field("value", pa.string())]))
    arr = pa.array([[{"key": b"x", "value": "1"}], [{"key": b"y", "value": "2"},
                                                    {"key": b"z", "value": None}]], bt)
    table = pa.table({"value": pa.array([b"a", b"b"]), "headers": arr}).slice(1)
    assert records_of(encode(table, now_ms=NOW))[0][5] == [("y", b"2"), ("z", None)]


def test_null_header_key_or_null_header_is_rejected():
    for hdr in ([[{"key": None, "value": b"1"}]], [[None]]):
        table = pa.table({"value": pa.array([b"v"]), "headers": pa.array(hdr, HEADERS_T)})
        with pytest.raises(InvalidOptionError, match="headers.*row 0"):
            encode(table)


# ---- timestamps ---------------------------------------------------------------------------------
@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
@pytest.mark.parametrize("tz", [None, "UTC", "Europe/Berlin", "+05:30"])
def test_timestamp_units_and_zones(unit, tz):
    when = [dt.datetime(2024, 2, 29, 23, 59, 58, 123456, tzinfo=dt.timezone.utc),
            dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc),
            dt.datetime(2038, 1, 19, 3, 14, 8, 999999, tzinfo=dt.timezone.utc)]
    arr = pa.array(when, pa.timestamp("us", tz="UTC")).cast(pa.timestamp(unit, tz="UTC"),
                                                            safe=False)
    if tz != "UTC":
        arr = arr.cast(pa.timestamp(unit, tz=tz)) if tz else \
            pa.Array.from_buffers(pa.timestamp(unit), 3, arr.buffers())
    table = pa.table({"value": pa.array([b"a", b"b", b"c"]), "timestamp": arr})
    got = [r[1] for r in records_of(encode(table, now_ms=NOW))]
    expect_ms = [int(w.timestamp()) * 1000 + (w.microsecond // 1000 if unit != "s" else 0)
                 for w in when]
    assert got == expect_ms


def test_timestamp_rounds_down_and_integer_millis():
    ns = pa.array([1_999_999, 1_000_000_000_000_999_999], pa.timestamp("ns", tz="UTC"))
    table = pa.table({"value": pa.array([b"a", b"b"]), "timestamp": ns})
    assert [r[1] for r in records_of(encode(table))] == [1, 1_000_000_000_000]
    for t in (pa.int64(), pa.int32()):
        table = pa.table({"value": pa.array([b"a", b"b"]),
                          "timestamp": pa.array([5, None], t)})
        assert [r[1] for r in records_of(encode(table, now_ms=NOW))] == [5, NOW]


def test_timestamps_out_of_order_and_null_now():
    ts = [NOW, NOW - 10_000_000, None, NOW + 5, NOW - 1]
    table = pa.table({"value": pa.array([b"v"] * 5),
                      "timestamp": pa.array(ts, pa.timestamp("ms"))})
    data, index = encode_batches(table, now_ms=NOW + 3)
    assert [r[1] for r in records_of(data)] == [NOW, NOW - 10_000_000, NOW + 3, NOW + 5,
                                               NOW - 1]
    (row,) = index.to_pylist()
    assert row["first_timestamp"] == NOW and row["max_timestamp"] == NOW + 5
    assert row["offset_of_max_timestamp"] == 3


def test_absent_timestamps_use_one_now():
    table = pa.table({"value": pa.array([b"v"] * 1000)})
    got = {r[1] for r in records_of(encode(table))}
    assert len(got) == 1


def test_negative_timestamp_rejected():
    table = pa.table({"value": pa.array([b"a", b"b"]),
                      "timestamp": pa.array([5, -2], pa.timestamp("ms"))})
    with pytest.raises(InvalidOptionError, match="timestamp.*row 1"):
        encode(table)


def test_no_timestamp_round_trips():
    # -1 ms is Kafka's NO_TIMESTAMP, which a read returns for a record without one: written
    # back it stays NO_TIMESTAMP (read by kafka-python as -1), nothing is invented
    table = pa.table({"value": pa.array([b"a", b"b"]),
                      "timestamp": pa.array([-1, 5], pa.timestamp("ms"))})
    assert [r[1] for r in records_of(encode(table))] == [-1, 5]


def test_timestamp_seconds_overflow_rejected():
    table = pa.table({"value": pa.array([b"a"]),
                      "timestamp": pa.array([2 ** 62], pa.timestamp("s"))})
    with pytest.raises(InvalidOptionError, match="timestamp"):
        encode(table)


# ---- errors -----------------------------------------------------------------------------------------
def test_missing_value_column():
    with pytest.raises(InvalidOptionError, match="'value'"):
        encode(pa.table({"key": pa.array([b"k"])}))


@pytest.mark.parametrize("column,arr", [
    ("value", pa.array([1, 2])),
    ("key", pa.array([1.5, 2.5])),
    ("timestamp", pa.array(["2024-01-01", "x"])),
    ("headers", pa.array([["a"], ["b"]])),
    ("headers", pa.array([[{"k": "a"}], [{"k": "b"}]])),
])
def test_wrong_column_types_name_the_column(column, arr):
    cols = {"value": pa.array([b"a", b"b"]), column: arr}
    with pytest.raises(InvalidOptionError, match=f"'{column}'"):
        encode(pa.table(cols))


@pytest.mark.parametrize("kwargs", [
    {"compression": "brotli"}, {"compression": 9}, {"base_offset": -1},
    {"base_offset": 1.5}, {"max_batch_bytes": 61}, {"max_batch_bytes": 2 ** 31},
    {"compression": "zstd", "compression_level": 99},
    {"compression": "none", "compression_level": 1}, {"threads": 0},
    {"partition_leader_epoch": -2}])
def test_bad_options(kwargs):
    with pytest.raises(InvalidOptionError):
        encode(pa.table({"value": pa.array([b"a"])}), **kwargs)


def test_rows_must_be_arrow():
    with pytest.raises(InvalidOptionError, match="Table or RecordBatch"):
        encode([{"value": b"a"}])


def test_offset_overflow():
    with pytest.raises(InvalidOptionError, match="overflows"):
        encode(pa.table({"value": pa.array([b"a", b"b"])}), base_offset=2 ** 63 - 1)


def test_corrupt_arrow_offsets_are_caught():
    # decreasing offsets: an invalid array that pyarrow's cheap validation lets through
    bad = pa.Array.from_buffers(pa.binary(), 2, [None, pa.py_buffer(
        struct.pack("<3i", 0, 5, 3)), pa.py_buffer(b"hello")])
    with pytest.raises(InvalidOptionError, match="'value'.*row 1") as exc:
        encode(pa.table({"value": bad}))
    assert isinstance(exc.value, KafkaLogError)


# ---- varint hooks -------------------------------------------------------------------------------
def test_varint_hooks_match_kafka_python():
    from kafka.record import util
    for v in [0, 1, -1, 63, -64, 64, -65, 8191, 8192, 2 ** 31 - 1, -2 ** 31]:
        buf = bytearray()
        util.encode_varint(v, buf.append)
        assert encode_varint(v) == bytes(buf) and varint_size(v) == len(buf)
        assert util.size_of_varint(v) == varint_size(v)
    for v in [2 ** 31, -2 ** 31 - 1, 2 ** 62, 2 ** 63 - 1, -2 ** 63]:
        assert len(encode_varlong(v)) == varlong_size(v)
    assert encode_varlong(2 ** 63 - 1) == bytes.fromhex("feffffffffffffffff01")
    with pytest.raises(InvalidOptionError, match="int32 range"):
        encode_varint(2 ** 31)


# ---- property: random tables through both oracles --------------------------------------------
def test_random_tables_every_codec():
    rng = random.Random(99)
    for i in range(25):
        table, expect = sample_table(rng.randint(1, 400), seed=1000 + i)
        compression = rng.choice(CODECS)
        base = rng.choice([0, 1, 2 ** 40])
        data = encode(table, compression=compression, base_offset=base,
                      max_batch_bytes=rng.choice([100, 2000, 1 << 20]), now_ms=NOW)
        check_records(data, expect, base_offset=base)


def test_codec_payloads_decompress_with_our_registry():
    table, _ = sample_table(100, seed=10)
    for compression in CODECS[1:]:
        data = encode(table, compression=compression, now_ms=NOW)
        plain = encode(table, now_ms=NOW)
        (h,) = headers_of(data)
        payload = memoryview(data)[V2_HEADER_SIZE:]
        assert bytes(codecs.decompress(CODEC_IDS[compression], payload)) == \
            plain[V2_HEADER_SIZE:]


# ---- hypothesis: arbitrary rows through the aiokafka decoder ---------------------------------
hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

_blob = st.one_of(st.none(), st.binary(max_size=300))
_header = st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=40)))
_row = st.tuples(_blob, _blob, st.one_of(st.none(), st.integers(0, 2 ** 50)),
                 st.one_of(st.none(), st.lists(_header, max_size=4)))


@hypothesis.settings(max_examples=80, deadline=None)
@hypothesis.given(rows=st.lists(_row, min_size=1, max_size=60),
                  compression=st.sampled_from(CODECS),
                  max_batch_bytes=st.sampled_from([62, 300, 5000, 1 << 20]),
                  base_offset=st.integers(0, 2 ** 62))
def test_hypothesis_rows_read_back_by_aiokafka(rows, compression, max_batch_bytes,
                                               base_offset):
    table = pa.table({
        "key": pa.array([r[0] for r in rows], pa.binary()),
        "value": pa.array([r[1] for r in rows], pa.binary()),
        "timestamp": pa.array([r[2] for r in rows], pa.timestamp("ms", tz="UTC")),
        "headers": pa.array([None if r[3] is None else
                             [{"key": k, "value": v} for k, v in r[3]] for r in rows],
                            HEADERS_T),
    })
    data, index = encode_batches(table, compression=compression, base_offset=base_offset,
                                 max_batch_bytes=max_batch_bytes, now_ms=NOW)
    got = [rec for _, recs in read_aiokafka(data) for rec in recs]
    assert [(o, t, k, v, h) for o, t, _, k, v, h in got] == [
        (base_offset + i, NOW if r[2] is None else r[2], r[0], r[1], list(r[3] or []))
        for i, r in enumerate(rows)]
    assert sum(index.column("record_count").to_pylist()) == len(rows)
    sizes = index.column("size").to_pylist()
    counts = index.column("record_count").to_pylist()
    assert all(s <= max_batch_bytes or c == 1 for s, c in zip(sizes, counts))


@pytest.mark.parametrize("compression", ["lz4", "zstd"])
def test_split_batches_rebased_on_far_timestamps(compression):
    # Incompressible batches get split; a half that starts at a far-away timestamp needs
    # longer timestamp deltas than the planned batch (a bigger scratch buffer).
    rng = random.Random(12)
    n = 64
    values = [rng.randbytes(90) for _ in range(n)]
    ts = [0 if i % 2 == 0 else 2 ** 50 for i in range(n)]
    ts[0] = 1
    table = pa.table({"value": pa.array(values),
                      "timestamp": pa.array(ts, pa.timestamp("ms"))})
    data, index = encode_batches(table, compression=compression, max_batch_bytes=2000,
                                 now_ms=NOW)
    got = records_of(data)
    assert [(r[1], r[4]) for r in got] == list(zip(ts, values))
    assert all(s <= 2000 for s in index.column("size").to_pylist())
    check_index(data, index)


def test_split_half_larger_than_any_planned_batch(monkeypatch):
    """The split safety net, forced: a compressor whose output never fits (a real zstd
    frame padded with a skippable frame, which every zstd reader skips). A half that
    starts at a far-away timestamp needs 10-byte deltas for all its records and is
    larger than every planned batch: the kernel must grow its scratch buffer."""
    real = codecs.compressor("zstd")

    def padded(data):
        pad = 400                    # never fits a 400-byte batch
        return real(data) + struct.pack("<II", 0x184D2A50, pad) + bytes(pad)

    monkeypatch.setattr(codecs, "compressor", lambda cid, level=None: padded)
    n = 41
    ts = [1] * n
    ts[20] = 2 ** 62
    table = pa.table({"value": pa.nulls(n, pa.binary()),
                      "timestamp": pa.array(ts, pa.timestamp("ms"))})
    _, plan = encode_batches(table, max_batch_bytes=400, now_ms=NOW)
    assert plan.num_rows == 1                      # uncompressed: one planned batch
    data, index = encode_batches(table, compression="zstd", max_batch_bytes=400,
                                 now_ms=NOW, threads=1)
    assert index.column("record_count").to_pylist() == [1] * n
    got = records_of(data)
    assert [(r[0], r[1], r[4]) for r in got] == [(i, ts[i], None) for i in range(n)]
    check_index(data, index)


@pytest.mark.parametrize("threads", [1, 3])
def test_compressed_output_grows_past_its_estimate(monkeypatch, threads):
    """The kernel writes each range's payloads into one buffer sized by an estimate
    (records + 1/6 + framing); a codec whose output is far larger (forced: a real zstd
    frame followed by a skippable frame of 3x the input) makes it grow. Bytes, index
    and read-back must be unaffected."""
    real = codecs.compressor("zstd")

    def padded(data):
        pad = 3 * len(data) + 1000
        return real(data) + struct.pack("<II", 0x184D2A50, pad) + bytes(pad)

    monkeypatch.setattr(codecs, "compressor", lambda cid, level=None: padded)
    table, expect = sample_table(400, seed=8)
    data, index = encode_batches(table, compression="zstd", max_batch_bytes=1 << 20,
                                 now_ms=NOW, threads=threads)
    assert type(data) is bytes
    assert sum(index.column("size").to_pylist()) == len(data)
    check_records(data, expect)
    check_index(data, index)


# ---- the kernel's CRC-32C ---------------------------------------------------------------------

@pytest.mark.skipif(not _kernel.HWCRC, reason="CPU lacks SSE4.2/PCLMULQDQ: the kernel "
                                              "uses the crc32c package")
def test_kernel_crc32c_matches_crc32c_package():
    from crc32c import crc32c
    rng = random.Random(3)
    buf = memoryview(rng.randbytes(70_000))
    for n in list(range(0, 600)) + [1023, 1024, 1025, 16384, 16447, 65536]:
        for off in (0, 1, 7):                         # unaligned starts
            part = buf[off:off + n]
            assert _kernel.crc32c_hw(part) == crc32c(part), (n, off)
            assert _kernel.crc32c_hw(part, 0xDEADBEEF) == crc32c(part, 0xDEADBEEF), (n, off)


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_kernel_crc_and_crc32c_package_give_the_same_bytes(compression):
    # the fallback path (CPUs without SSE4.2/PCLMULQDQ) is forced off and on
    table, expect = sample_table(500, seed=6)
    before = _kernel._use_hw_crc(False)
    try:
        slow = encode_batches(table, compression=compression, max_batch_bytes=3000,
                              now_ms=NOW)
        slow3 = encode(table, compression=compression, max_batch_bytes=3000, now_ms=NOW,
                       threads=3)
    finally:
        _kernel._use_hw_crc(before)
    fast = encode_batches(table, compression=compression, max_batch_bytes=3000, now_ms=NOW)
    assert slow[0] == fast[0] == slow3
    assert slow[1].equals(fast[1])
    check_records(fast[0], expect)


def test_every_field_length_is_copied_exactly():
    """Keys, values and header fields of every length 0..300 (the kernel copies short
    fields with fixed-size moves: overlapping pairs, 16-byte steps): read back exactly
    by aiokafka and by our decoder."""
    rng = random.Random(7)
    vals = [bytes(rng.getrandbits(8) for _ in range(n)) for n in range(301)]
    keys = [v[::-1] for v in vals]
    headers = [[{"key": "h" * (n % 40), "value": v[: n % 50]}] for n, v in enumerate(vals)]
    t = pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(vals, pa.binary()),
                  "headers": pa.array(headers, HEADERS_T)})
    for compression in ("none", "lz4"):
        data = encode(t, compression=compression, max_batch_bytes=4096, now_ms=NOW)
        got = [r for _, recs in read_aiokafka(data) for r in recs]
        assert [r[3] for r in got] == keys and [r[4] for r in got] == vals
        assert [r[5] for r in got] == [[(h[0]["key"], h[0]["value"])] for h in headers]
        back = decode(data)
        assert back.column("value").to_pylist() == vals
        assert back.column("key").to_pylist() == keys
