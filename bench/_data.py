"""Benchmark data: one deterministic generator shared by the bench scripts.

The records look like a typical event topic: 16-byte keys, JSON-ish values of about
120 bytes (a shared skeleton with varying fields, so they compress the way real
payloads do: neither random noise nor one repeated string), millisecond timestamps
that mostly increase, and headers on one record in five.

Everything is built with numpy/pyarrow buffer operations, so a million records take
about a second. The same records are available three ways:

* :func:`make_table` — an Arrow table (``key``, ``value``, ``timestamp``, ``headers``)
  in the types :func:`spark_kafkalog.format.encode` accepts;
* :func:`to_records` — Python tuples ``(key, value, timestamp_ms, headers)`` for the
  per-record builders of aiokafka and kafka-python;
* :func:`build_log` — v2 record batches written by aiokafka's or kafka-python's builder
  (independent of this project), cut at ``batch_bytes`` and given consecutive base
  offsets the way a broker assigns them.

This module is bench-only: it imports aiokafka/kafka-python lazily, inside the builder
functions, so importing it costs nothing.
"""
from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa

#: Kafka's header list type, as in spark_kafkalog.format.schema (list item "element")
HEADERS_TYPE = pa.list_(pa.field("element", pa.struct([
    pa.field("key", pa.string()), pa.field("value", pa.binary())])))

BASE_TIMESTAMP_MS = 1_700_000_000_000

_EVENTS = [b"click", b"view", b"purchase", b"add_to_cart", b"search", b"logout", b"login"]
_COUNTRIES = [b"DE", b"FR", b"US", b"GB", b"JP", b"BR", b"IN", b"NL", b"SE", b"ES"]
_HEADER_KEYS = ["trace-id", "source", "content-type", "retry"]


def _binary_array(data: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """A binary array over a uint8 data buffer and int32 offsets (n + 1 of them)."""
    return pa.Array.from_buffers(pa.binary(), len(offsets) - 1,
                                 [None, pa.py_buffer(offsets.astype(np.int32)),
                                  pa.py_buffer(data.astype(np.uint8))])


def _value_pool(rng: np.random.Generator, size: int, target: int) -> list[bytes]:
    """``size`` distinct JSON-ish values averaging ``target`` bytes, each starting with
    ``{"seq":"00000000"`` (8 digits the generator overwrites with the record number)."""
    pool = []
    hexdigits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    for _ in range(size):
        event = _EVENTS[rng.integers(len(_EVENTS))]
        country = _COUNTRIES[rng.integers(len(_COUNTRIES))]
        user = int(rng.integers(1, 5_000_000))
        amount = int(rng.integers(0, 100_000))
        head = (b'{"seq":"00000000","user":%d,"event":"%s","country":"%s","amount":%d.%02d,'
                % (user, event, country, amount // 100, amount % 100))
        # The session token is the high-entropy part; its length sets the value size.
        pad = max(8, target - len(head) - 14 + int(rng.integers(-16, 17)))
        token = hexdigits[rng.integers(0, 16, pad)].tobytes()
        pool.append(head + b'"session":"' + token + b'"}')
    return pool


def make_table(n: int, *, seed: int = 20240611, key_size: int = 16, value_size: int = 120,
               header_every: int = 5, pool_size: int = 8192) -> pa.Table:
    """``n`` records as an Arrow table: ``key`` binary (``key_size`` bytes), ``value``
    binary (about ``value_size`` bytes), ``timestamp`` timestamp[us, UTC] (whole
    milliseconds), ``headers`` (1 or 2 headers on every ``header_every``-th record, null
    on the others). Same arguments, same table."""
    rng = np.random.default_rng(seed)
    idx = np.arange(n, dtype=np.int64)

    # keys: "user-" + 11 hex digits of a scrambled id, fixed width
    ids = (idx * 0x9E3779B1 + 12345) % (1 << 44)
    hexd = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    prefix = np.frombuffer(b"user-", dtype=np.uint8)
    ndig = key_size - len(prefix)
    shifts = (4 * np.arange(ndig - 1, -1, -1, dtype=np.int64))
    digits = hexd[(ids[:, None] >> shifts[None, :]) & 0xF]
    keys = np.concatenate([np.broadcast_to(prefix, (n, len(prefix))), digits], axis=1)
    key_arr = _binary_array(keys.reshape(-1), np.arange(0, (n + 1) * key_size, key_size))

    # values: a pool entry per record, with the record number written into its "seq"
    pool = _value_pool(rng, pool_size, value_size)
    pool_arr = pa.array(pool, type=pa.binary())
    choice = rng.integers(0, pool_size, n)
    taken = pool_arr.take(pa.array(choice))
    lengths = np.array([len(v) for v in pool], dtype=np.int64)[choice]
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = np.frombuffer(taken.buffers()[2], dtype=np.uint8)[:offsets[-1]].copy()
    dec = np.frombuffer(b"0123456789", dtype=np.uint8)
    seq_pos = len(b'{"seq":"')
    for d in range(8):
        data[offsets[:-1] + seq_pos + 7 - d] = dec[(idx // 10 ** d) % 10]
    value_arr = _binary_array(data, offsets)

    # timestamps: mostly increasing, a few ms apart, now and then a little out of order
    steps = rng.integers(0, 4, n)
    ts_ms = BASE_TIMESTAMP_MS + np.cumsum(steps) - (rng.integers(0, 50, n) * (rng.random(n) < 0.01))
    ts_arr = pa.array(ts_ms * 1000, type=pa.timestamp("us", tz="UTC"))

    headers_arr = _make_headers(rng, n, header_every)
    return pa.table({"key": key_arr, "value": value_arr, "timestamp": ts_arr,
                     "headers": headers_arr})


def _make_headers(rng: np.random.Generator, n: int, every: int) -> pa.Array:
    has = (np.arange(n) % every) == 0
    counts = np.where(has, 1 + (rng.random(n) < 0.5), 0).astype(np.int32)
    total = int(counts.sum())
    hk = pa.array(_HEADER_KEYS, type=pa.string()).take(
        pa.array(rng.integers(0, len(_HEADER_KEYS), total)))
    hexd = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    hv_data = hexd[rng.integers(0, 16, total * 16)]
    hv = _binary_array(hv_data, np.arange(0, (total + 1) * 16, 16))
    # a few null header values: Kafka allows them, and decoders must keep them null
    hv_valid = rng.random(total) >= 0.02
    hv = pa.Array.from_buffers(pa.binary(), total,
                               [pa.array(hv_valid).buffers()[1]] + hv.buffers()[1:],
                               null_count=int((~hv_valid).sum()))
    structs = pa.StructArray.from_arrays([hk, hv], fields=list(HEADERS_TYPE.value_type))
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), structs, type=HEADERS_TYPE,
                                    mask=pa.array(~has))


def to_records(table: pa.Table) -> list[tuple]:
    """The table as ``(key, value, timestamp_ms, headers)`` tuples, headers a list of
    ``(str, bytes | None)`` (empty when the column is null), as the builders take them."""
    keys = table.column("key").to_pylist()
    values = table.column("value").to_pylist()
    ts = (table.column("timestamp").cast(pa.int64()).to_numpy() // 1000).tolist()
    headers = [[(h["key"], h["value"]) for h in hs] if hs else []
               for hs in table.column("headers").to_pylist()]
    return list(zip(keys, values, ts, headers))


# ---- independent encoders ---------------------------------------------------------------

_BASE_OFFSET = struct.Struct(">q")
_LAST_OFFSET_DELTA = struct.Struct(">i")   # at byte 23 of a v2 batch


def builder_class(impl: str):
    """``DefaultRecordBatchBuilder`` of ``impl`` ("aiokafka" — its Cython class — or
    "kafka-python")."""
    if impl == "aiokafka":
        from aiokafka.record.default_records import DefaultRecordBatchBuilder
        return DefaultRecordBatchBuilder
    if impl == "kafka-python":
        from kafka.record.default_records import DefaultRecordBatchBuilder
        return DefaultRecordBatchBuilder
    raise ValueError(f"unknown implementation {impl!r}")


def build_batches(records, impl: str, codec_id: int, batch_bytes: int) -> list[bytearray]:
    """Encode ``records`` with ``impl``'s batch builder as a producer does: append until
    the builder refuses (``batch_bytes`` reached), close, start the next batch. Every
    batch carries offset deltas from 0 and base offset 0 (the producer's view)."""
    cls = builder_class(impl)
    out = []
    builder = cls(2, codec_id, 0, -1, -1, -1, batch_bytes)
    delta = 0
    for key, value, ts, headers in records:
        if builder.append(delta, ts, key, value, headers) is None:
            out.append(builder.build())
            builder = cls(2, codec_id, 0, -1, -1, -1, batch_bytes)
            delta = 0
            if builder.append(delta, ts, key, value, headers) is None:
                raise RuntimeError("a single record does not fit an empty batch")
        delta += 1
    if delta:
        out.append(builder.build())
    return out


def assign_offsets(batches, base_offset: int = 0) -> bytes:
    """Concatenate producer batches into a log: each gets the next base offset, exactly
    what a broker does on append (baseOffset is outside the CRC)."""
    parts = []
    offset = base_offset
    for batch in batches:
        buf = bytearray(batch)
        _BASE_OFFSET.pack_into(buf, 0, offset)
        offset += _LAST_OFFSET_DELTA.unpack_from(buf, 23)[0] + 1
        parts.append(bytes(buf))
    return b"".join(parts)


def build_log(records, impl: str = "aiokafka", codec_id: int = 0,
              batch_bytes: int = 16384, base_offset: int = 0) -> bytes:
    """``records`` as a log segment's bytes, encoded by ``impl``'s builder."""
    return assign_offsets(build_batches(records, impl, codec_id, batch_bytes), base_offset)


def split_batches(log: bytes) -> list[tuple[int, int]]:
    """``(position, size)`` of each batch in well-formed ``log`` (no validation: bench
    input only)."""
    out = []
    pos = 0
    n = len(log)
    while pos + 12 <= n:
        size = 12 + struct.unpack_from(">i", log, pos + 8)[0]
        out.append((pos, size))
        pos += size
    return out


def compressed_payloads(log: bytes) -> list[memoryview]:
    """The compressed records section of every v2 batch in ``log`` (bytes 61.. of each
    batch): exactly what a decoder hands to the codec library."""
    view = memoryview(log)
    return [view[pos + 61:pos + size] for pos, size in split_batches(log)]
