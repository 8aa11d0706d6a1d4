"""Build Kafka record batches for tests: with kafka-python's and aiokafka's own builders,
and by hand for what no client builder writes (control and transactional batches,
LogAppendTime, delete horizon, compaction gaps, empty batches, legacy wrappers with
broker offsets, deliberately broken bytes).

Independent of the code under test: framing uses ``struct`` and the layouts in
``spark_kafkalog.format.wire`` (constants only), checksums come from ``crc32c`` and
``zlib``, compression from kafka-python's ``kafka.codec``.

Expected rows are :class:`Rec` tuples; :func:`rows` turns a decoded RecordBatch into the
same shape, so a test reads ``assert rows(decode(data)) == expected``.
"""
from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import crc32c
import pyarrow as pa
from kafka import codec as kcodec

from spark_kafkalog.format import wire

# ---- what a row looks like ---------------------------------------------------------------


class Rec(NamedTuple):
    """One data record as a test expects to read it back.

    ``timestamp`` in epoch ms; a record without one (magic 0, or NO_TIMESTAMP -1) reads
    as -1 ms, as in Spark's Kafka source (the Java consumer's ``timestamp()`` is -1);
    ``headers`` None for a record without headers (Spark's convention), else a tuple of
    (str key, bytes-or-None value)."""
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple | None = None


def rows(batch: pa.RecordBatch | pa.Table) -> list[Rec]:
    """A decoded batch as a list of :class:`Rec` (works with or without the headers
    column; without it ``headers`` is None)."""
    ts_us = batch.column("timestamp").cast(pa.int64()).to_pylist()
    cols = {name: batch.column(name).to_pylist()
            for name in ("offset", "timestampType", "key", "value")}
    has_headers = "headers" in batch.schema.names
    headers = batch.column("headers").to_pylist() if has_headers else [None] * len(ts_us)
    out = []
    for i, ts in enumerate(ts_us):
        h = headers[i]
        out.append(Rec(
            cols["offset"][i],
            None if ts is None else ts // 1000,
            cols["timestampType"][i],
            cols["key"][i],
            cols["value"][i],
            None if h is None else tuple((e["key"], e["value"]) for e in h)))
    return out


def kafka_python_rows(data: bytes) -> list[Rec]:
    """Oracle: the data records kafka-python's reader finds in ``data`` (control batches
    skipped; no timestamp -- kafka-python's None for magic 0 -- as -1, what the Java
    consumer reports)."""
    from kafka.record.memory_records import MemoryRecords
    out = []
    records = MemoryRecords(bytes(data))
    while records.has_next():
        batch = records.next_batch()
        if getattr(batch, "is_control_batch", False):
            continue
        for r in batch:
            ts = -1 if r.timestamp is None else r.timestamp
            hdrs = tuple(r.headers) if r.headers else None
            out.append(Rec(r.offset, ts, r.timestamp_type if r.timestamp_type is not None
                           else -1, r.key, r.value, hdrs))
    return out


# ---- varints and small pieces ---------------------------------------------------------------

def varint(value: int) -> bytes:
    """Zig-zag base-128 varint/varlong, as Kafka writes it."""
    z = (value << 1) ^ (value >> 63)
    z &= (1 << 64) - 1
    out = bytearray()
    while True:
        if z < 0x80:
            out.append(z)
            return bytes(out)
        out.append((z & 0x7F) | 0x80)
        z >>= 7


def compress(codec: int, data: bytes, *, magic: int = 2) -> bytes:
    """Payload compression with kafka-python's codecs (the Java client's framings:
    gzip member, xerial snappy, lz4 frame -- with the broken pre-0.10 header checksum for
    magic 0 -- and zstd)."""
    if codec == wire.CODEC_NONE:
        return bytes(data)
    if codec == wire.CODEC_GZIP:
        return kcodec.gzip_encode(bytes(data))
    if codec == wire.CODEC_SNAPPY:
        return kcodec.snappy_encode(bytes(data))
    if codec == wire.CODEC_LZ4:
        return (kcodec.lz4_encode_old_kafka(bytes(data)) if magic == 0
                else kcodec.lz4_encode(bytes(data)))
    if codec == wire.CODEC_ZSTD:
        return kcodec.zstd_encode(bytes(data))
    raise ValueError(f"unknown codec {codec}")


# ---- v2 by hand ------------------------------------------------------------------------------

def v2_record(offset_delta: int, timestamp_delta: int, key: bytes | None,
              value: bytes | None, headers: Iterable = (), *, attributes: int = 0,
              header_key_bytes: bool = False) -> bytes:
    """One v2 record: length varint + body. ``headers``: (key, value) pairs; keys are
    str (UTF-8 encoded) or, with ``header_key_bytes``, raw bytes (to write invalid
    UTF-8)."""
    body = bytearray([attributes])
    body += varint(timestamp_delta)
    body += varint(offset_delta)
    for field in (key, value):
        if field is None:
            body += varint(-1)
        else:
            body += varint(len(field)) + bytes(field)
    headers = list(headers)
    body += varint(len(headers))
    for hk, hv in headers:
        raw = hk if header_key_bytes or isinstance(hk, (bytes, bytearray)) else hk.encode()
        body += varint(len(raw)) + bytes(raw)
        body += varint(-1) if hv is None else varint(len(hv)) + bytes(hv)
    return varint(len(body)) + bytes(body)


def v2_batch(records: Sequence[bytes] | bytes, *, base_offset: int = 0,
             count: int | None = None, last_offset_delta: int | None = None,
             base_timestamp: int = 0, max_timestamp: int | None = None,
             codec: int = 0, log_append_time: bool = False, transactional: bool = False,
             control: bool = False, delete_horizon: bool = False,
             producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
             partition_leader_epoch: int = 0, extra_attributes: int = 0,
             crc: int | None = None) -> bytes:
    """A v2 record batch around already-encoded records (see :func:`v2_record`), or
    around a raw payload when ``records`` is bytes (with ``count`` given).

    ``count`` defaults to the number of records, ``last_offset_delta`` to count - 1,
    ``max_timestamp`` to ``base_timestamp``. ``delete_horizon`` sets attribute bit 6
    (``base_timestamp`` is then the deleteHorizonMs). ``crc`` overrides the computed
    CRC-32C (to write a bad one)."""
    if isinstance(records, (bytes, bytearray)):
        payload = bytes(records)
        if count is None:
            raise ValueError("count is needed with a raw payload")
    else:
        payload = b"".join(records)
        if count is None:
            count = len(records)
    if last_offset_delta is None:
        last_offset_delta = max(count - 1, 0)
    if max_timestamp is None:
        max_timestamp = base_timestamp
    attrs = codec | extra_attributes
    if log_append_time:
        attrs |= wire.ATTR_TIMESTAMP_TYPE
    if transactional:
        attrs |= wire.ATTR_TRANSACTIONAL
    if control:
        attrs |= wire.ATTR_CONTROL
    if delete_horizon:
        attrs |= wire.ATTR_DELETE_HORIZON
    body = compress(codec, payload) if codec else payload
    length = wire.V2_HEADER_SIZE - wire.LOG_OVERHEAD + len(body)
    head = bytearray(wire.V2_HEADER.pack(
        base_offset, length, partition_leader_epoch, 2, 0, attrs, last_offset_delta,
        base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, count))
    batch = head + body
    if crc is None:
        crc = crc32c.crc32c(bytes(batch[wire.V2_ATTRIBUTES_POS:]))
    struct.pack_into(">I", batch, wire.V2_CRC_POS, crc)
    return bytes(batch)


def v2_simple(recs: Sequence[tuple], *, base_offset: int = 0, base_timestamp: int = 0,
              **kwargs) -> bytes:
    """A v2 batch from (offset, timestamp, key, value[, headers]) tuples with absolute
    offsets and timestamps (gaps allowed). ``max_timestamp`` defaults to the largest."""
    encoded = []
    max_ts = base_timestamp
    last = 0
    for r in recs:
        off, ts, key, value = r[:4]
        headers = r[4] if len(r) > 4 else ()
        encoded.append(v2_record(off - base_offset, ts - base_timestamp, key, value,
                                 headers))
        max_ts = max(max_ts, ts)
        last = off - base_offset
    kwargs.setdefault("max_timestamp", max_ts)
    kwargs.setdefault("last_offset_delta", last)
    return v2_batch(encoded, base_offset=base_offset, base_timestamp=base_timestamp,
                    **kwargs)


def control_batch(control_type: int, *, base_offset: int, producer_id: int = 4000,
                  producer_epoch: int = 3, timestamp: int = 1_700_000_000_000,
                  coordinator_epoch: int = 7, key_version: int = 0,
                  value: bytes | None = None, codec: int = 0,
                  partition_leader_epoch: int = 0) -> bytes:
    """A control batch holding one control record: key ``version int16, type int16``.
    Transaction markers (0 ABORT, 1 COMMIT) get value ``version int16 (0),
    coordinatorEpoch int32``; other types (2 LEADER_CHANGE, ...) an opaque ``value``.
    Transaction markers are transactional, as the broker writes them."""
    key = struct.pack(">hh", key_version, control_type)
    if value is None:
        value = struct.pack(">hi", 0, coordinator_epoch)
    rec = v2_record(0, 0, key, value)
    txn = control_type in (wire.CONTROL_ABORT, wire.CONTROL_COMMIT)
    return v2_batch([rec], base_offset=base_offset, base_timestamp=timestamp,
                    max_timestamp=timestamp, control=True, transactional=txn,
                    producer_id=producer_id if txn else -1,
                    producer_epoch=producer_epoch if txn else -1, codec=codec,
                    partition_leader_epoch=partition_leader_epoch)


def empty_batch(*, base_offset: int, last_offset_delta: int, max_timestamp: int = 0,
                producer_id: int = 1000, producer_epoch: int = 0, base_sequence: int = 0,
                transactional: bool = False) -> bytes:
    """What the log cleaner leaves when it removes every record of a batch whose
    producer state must be kept: the header alone, count 0 (Kafka's writeEmptyHeader)."""
    return v2_batch([], base_offset=base_offset, count=0,
                    last_offset_delta=last_offset_delta, base_timestamp=max_timestamp,
                    max_timestamp=max_timestamp, producer_id=producer_id,
                    producer_epoch=producer_epoch, base_sequence=base_sequence,
                    transactional=transactional)


# ---- legacy by hand ----------------------------------------------------------------------------

def legacy_message(offset: int, key: bytes | None, value: bytes | None, *, magic: int,
                   timestamp: int = -1, attributes: int = 0, crc: int | None = None) -> bytes:
    """One magic 0/1 log entry: offset, size, crc, magic, attributes, [timestamp], key,
    value. ``crc`` overrides the computed CRC-32."""
    body = bytearray([magic, attributes])
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else (
            struct.pack(">i", len(field)) + bytes(field))
    if crc is None:
        crc = zlib.crc32(bytes(body))
    msg = struct.pack(">I", crc) + bytes(body)
    return struct.pack(">qi", offset, len(msg)) + msg


def legacy_wrapper(inner: bytes, *, offset: int, magic: int, codec: int,
                   timestamp: int = -1, log_append_time: bool = False) -> bytes:
    """A compressed wrapper message whose value is the message set ``inner``."""
    attrs = codec | (wire.LEGACY_TIMESTAMP_TYPE if log_append_time else 0)
    return legacy_message(offset, None, compress(codec, inner, magic=magic), magic=magic,
                          timestamp=timestamp, attributes=attrs)


def legacy_set(recs: Sequence[tuple], *, magic: int) -> bytes:
    """Uncompressed messages from (offset, timestamp, key, value) tuples (timestamp
    ignored for magic 0)."""
    return b"".join(legacy_message(o, k, v, magic=magic, timestamp=-1 if t is None else t)
                    for o, t, k, v in recs)


# ---- the clients' own builders ----------------------------------------------------------------

def _client(lib: str):
    if lib == "kafka-python":
        from kafka.record.default_records import DefaultRecordBatchBuilder
        from kafka.record.legacy_records import LegacyRecordBatchBuilder
    elif lib == "aiokafka":
        from aiokafka.record.default_records import DefaultRecordBatchBuilder
        from aiokafka.record.legacy_records import LegacyRecordBatchBuilder
    else:
        raise ValueError(lib)
    return DefaultRecordBatchBuilder, LegacyRecordBatchBuilder


#: codecs each client's builder writes, per magic
CLIENT_CODECS = {
    ("kafka-python", 0): (0, 1, 2, 3),
    ("kafka-python", 1): (0, 1, 2, 3),
    ("kafka-python", 2): (0, 1, 2, 3, 4),
    ("aiokafka", 0): (0, 1, 2),          # aiokafka refuses lz4 for magic 0 (KAFKA-3160)
    ("aiokafka", 1): (0, 1, 2, 3),
    ("aiokafka", 2): (0, 1, 2, 3, 4),
}


def set_offset(entry: bytes, offset: int) -> bytes:
    """The batch / log entry with its first 8 bytes (base offset, or a legacy entry's
    offset) replaced -- not covered by any CRC, as when a broker assigns offsets."""
    return struct.pack(">q", offset) + bytes(entry[8:])


def client_batch(lib: str, magic: int, codec: int, recs: Sequence[tuple], *,
                 base_offset: int = 0, producer: tuple[int, int, int] | None = None,
                 transactional: bool = False) -> bytes:
    """Records built by ``lib``'s own batch builder ("kafka-python" or "aiokafka").

    ``recs``: (timestamp, key, value, headers) tuples; offsets are base_offset + index.
    magic 2: one batch (producer = (id, epoch, base_sequence)). magic 0/1 uncompressed:
    a message set. magic 0/1 compressed: one wrapper whose offset is then set as a
    broker does (that of the last inner message; inner offsets relative for v1,
    absolute for v0). Raises AssertionError if the builder fell back to no compression
    (the clients do when compression does not pay; use compressible values)."""
    default_builder, legacy_builder = _client(lib)
    n = len(recs)
    if magic == 2:
        pid, epoch, seq = producer or (-1, -1, -1)
        b = default_builder(magic=2, compression_type=codec,
                            is_transactional=int(transactional), producer_id=pid,
                            producer_epoch=epoch, base_sequence=seq,
                            batch_size=1 << 30)
        for i, (ts, key, value, headers) in enumerate(recs):
            meta = b.append(i, timestamp=ts, key=key, value=value, headers=list(headers))
            if meta is None:
                raise AssertionError("builder refused a record")
        out = bytes(b.build())
        attrs = struct.unpack_from(">h", out, wire.V2_ATTRIBUTES_POS)[0]
        if attrs & wire.ATTR_CODEC_MASK != codec:
            raise AssertionError(f"{lib} wrote codec {attrs & 7}, not {codec}")
        return set_offset(out, base_offset)
    b = legacy_builder(magic, codec, 1 << 30)
    for i, (ts, key, value, _headers) in enumerate(recs):
        # v0 inner offsets are absolute, v1 relative; uncompressed: absolute
        off = i if (codec and magic == 1) else base_offset + i
        if b.append(off, timestamp=ts, key=key, value=value) is None:
            raise AssertionError("builder refused a record")
    out = bytes(b.build())
    if codec:
        if out[wire.LEGACY_ATTRIBUTES_POS] & wire.LEGACY_CODEC_MASK != codec:
            raise AssertionError(f"{lib} did not compress with codec {codec}")
        out = set_offset(out, base_offset + n - 1)
    return out


def client_expected(magic: int, recs: Sequence[tuple], *, base_offset: int = 0,
                    log_append_time: int | None = None) -> list[Rec]:
    """The rows :func:`client_batch` input must decode to."""
    out = []
    for i, (ts, key, value, headers) in enumerate(recs):
        if magic == 0:
            t, tt = -1, -1               # no timestamp: -1 ms (NO_TIMESTAMP), type -1
        elif log_append_time is not None:
            t, tt = log_append_time, 1
        else:
            t, tt = ts, 0
        out.append(Rec(base_offset + i, t, tt, key, value,
                       tuple(headers) if headers else None))
    return out


# ---- deliberate damage ---------------------------------------------------------------------------

def flip(data: bytes, pos: int, mask: int = 0x01) -> bytes:
    """``data`` with the byte at ``pos`` xor-ed with ``mask``."""
    out = bytearray(data)
    out[pos] ^= mask
    return bytes(out)


def patch(data: bytes, pos: int, fmt: str, *values) -> bytes:
    """``data`` with ``struct.pack(fmt, *values)`` written at ``pos`` (no CRC fix-up)."""
    out = bytearray(data)
    struct.pack_into(fmt, out, pos, *values)
    return bytes(out)


def refresh_crc(batch: bytes) -> bytes:
    """Recompute the CRC of one v2 batch or one legacy entry after a patch, so a test
    reaches the check behind the CRC."""
    out = bytearray(batch)
    magic = out[wire.MAGIC_POS]
    if magic == 2:
        struct.pack_into(">I", out, wire.V2_CRC_POS,
                         crc32c.crc32c(bytes(out[wire.V2_ATTRIBUTES_POS:])))
    else:
        struct.pack_into(">I", out, wire.LEGACY_CRC_POS,
                         zlib.crc32(bytes(out[wire.LEGACY_MAGIC_POS:])))
    return bytes(out)
