"""Rebuilding v2 record batches as Kafka's log cleaner does (``MemoryRecords.filterTo``).

A cleaned batch keeps its header -- baseOffset, lastOffsetDelta (so the producer's last
sequence survives), producer id/epoch/baseSequence, partitionLeaderEpoch, codec,
timestamp type, transactional and control flags -- and holds only the retained records,
each with its own offset (offsetDelta from the unchanged baseOffset: gaps) and timestamp.
With a delete horizon (attribute bit 6) baseTimestamp holds deleteHorizonMs and the
records' timestampDeltas are taken from it. Records are written by the encode kernel
(:class:`~spark_kafkalog.format._encode.Encoder` with a given layout); the header fields
are set here, then the CRC-32C. An emptied batch the cleaner keeps (a producer's last) is
a bare header (``DefaultRecordBatch.writeEmptyHeader``).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_kafkalog.errors import CorruptRecordError, InvalidOptionError
from spark_kafkalog.format import codecs
from spark_kafkalog.format._decode import decode_varint, decode_varlong
from spark_kafkalog.format._encode import encode_varint, encode_varlong
from spark_kafkalog.format.encode import _crc32c_fn
from spark_kafkalog.format.encode_columns import make_encoder
from spark_kafkalog.format.wire import (
    ATTR_CODEC_MASK,
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    CODEC_NONE,
    LOG_OVERHEAD,
    V2_ATTRIBUTES_POS,
    V2_HEADER,
    V2_HEADER_SIZE,
)

__all__ = ["BATCH_FIELDS", "rebuild_batches", "empty_batch", "rebase_control_batch"]

_INT32_MAX = 2 ** 31 - 1

#: per output batch, the header fields :func:`rebuild_batches` takes (numpy int64 each)
BATCH_FIELDS = ("base_offset", "last_offset", "attributes", "base_timestamp",
                "max_timestamp", "producer_id", "producer_epoch", "base_sequence",
                "leader_epoch")


def _header(base_offset: int, length: int, leader_epoch: int, attributes: int,
            last_delta: int, base_ts: int, max_ts: int, producer_id: int, epoch: int,
            base_sequence: int, count: int) -> bytearray:
    return bytearray(V2_HEADER.pack(base_offset, length, leader_epoch, 2, 0, attributes,
                                    last_delta, base_ts, max_ts, producer_id, epoch,
                                    base_sequence, count))


def _seal(buf: bytearray | memoryview, crc32c) -> None:
    """Write the CRC-32C of ``buf[attributes:]`` into ``buf`` (one whole batch)."""
    crc = crc32c(bytes(buf[V2_ATTRIBUTES_POS:]))
    buf[V2_ATTRIBUTES_POS - 4:V2_ATTRIBUTES_POS] = crc.to_bytes(4, "big")


def empty_batch(*, base_offset: int, last_offset: int, attributes: int, timestamp: int,
                producer_id: int, producer_epoch: int, base_sequence: int,
                leader_epoch: int) -> bytes:
    """A batch with no records covering ``[base_offset, last_offset]``: what the cleaner
    keeps of a producer's last batch. Uncompressed, no delete horizon; timestamp type,
    transactional and control flags from ``attributes``; base and max timestamp
    ``timestamp`` (the original batch's maxTimestamp)."""
    attrs = attributes & (ATTR_TIMESTAMP_TYPE | ATTR_TRANSACTIONAL | ATTR_CONTROL)
    buf = _header(base_offset, V2_HEADER_SIZE - LOG_OVERHEAD, leader_epoch, attrs,
                  last_offset - base_offset, timestamp, timestamp, producer_id,
                  producer_epoch, base_sequence, 0)
    _seal(buf, _crc32c_fn())
    return bytes(buf)


def rebase_control_batch(batch, horizon_ms: int, *, position: int = 0) -> bytes:
    """A control batch (``batch``: its bytes) with the delete horizon set: baseTimestamp
    becomes ``horizon_ms`` and each record's timestampDelta is re-based on it (what
    ``filterTo`` does to a marker of an emptied transaction). The records are otherwise
    copied unchanged; the result is uncompressed (markers always are). ``position``
    names the batch in errors."""
    view = memoryview(batch)
    try:
        (base, _length, epoch, magic, _crc, attrs, last_delta, base_ts, max_ts, pid,
         pepoch, seq, count) = V2_HEADER.unpack_from(view, 0)
    except Exception as err:
        raise CorruptRecordError("control batch header is cut short",
                                 position=position) from err
    if magic != 2 or not attrs & ATTR_CONTROL:
        raise InvalidOptionError(f"rebase_control_batch: not a v2 control batch at "
                                 f"position {position}")
    payload = bytes(view[V2_HEADER_SIZE:])
    codec = attrs & ATTR_CODEC_MASK
    if codec != CODEC_NONE:
        payload = codecs.decompress(codec, payload)
    out = bytearray()
    pos = 0
    try:
        for _ in range(count):
            length, pos = decode_varint(payload, pos)
            end = pos + length
            rec_attr = payload[pos]
            delta, p2 = decode_varlong(payload, pos + 1)
            body = (bytes([rec_attr]) + encode_varlong(base_ts + delta - horizon_ms)
                    + payload[p2:end])
            out += encode_varint(len(body)) + body
            pos = end
    except (IndexError, ValueError) as err:
        raise CorruptRecordError(f"control batch records are malformed ({err})",
                                 position=position, offset=base) from err
    if pos != len(payload):
        raise CorruptRecordError("control batch has bytes after its records",
                                 position=position, offset=base)
    new_attrs = (attrs & ~ATTR_CODEC_MASK) | ATTR_DELETE_HORIZON
    buf = _header(base, V2_HEADER_SIZE - LOG_OVERHEAD + len(out), epoch, new_attrs,
                  last_delta, horizon_ms, max_ts, pid, pepoch, seq, count) + out
    _seal(buf, _crc32c_fn())
    return bytes(buf)


def _check_layout(starts: np.ndarray, n: int, nb: int) -> None:
    if starts.shape != (nb + 1,) or starts[0] != 0 or starts[-1] != n or np.any(
            np.diff(starts) <= 0):
        raise InvalidOptionError("rebuild_batches: starts must rise from 0 to the number "
                                 "of rows, one entry per batch plus one, no empty batch")


def rebuild_batches(table, rows: np.ndarray, starts: np.ndarray, offset_deltas: np.ndarray,
                    fields: dict, *, now_ms: int = 0) -> list[bytes]:
    """Batches holding the records ``table.take(rows)`` (``table`` as :func:`encode`
    takes it: decoded rows), cut at ``starts`` (``nbatches + 1`` positions into
    ``rows``), record ``i`` at offset ``base_offset + offset_deltas[i]`` of its batch.
    ``fields``: :data:`BATCH_FIELDS` -> int64 array per batch; ``attributes`` gives the
    codec (each batch keeps its own), timestamp type, transactional/control and
    delete-horizon bits; ``base_timestamp`` is used when the horizon bit is set (it is
    deleteHorizonMs), else the batch's first record's timestamp is; ``max_timestamp``
    is used for LogAppendTime batches, else the records' largest. Returns one ``bytes``
    per batch, in order."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    deltas = np.ascontiguousarray(offset_deltas, dtype=np.int64)
    f = {k: np.asarray(fields[k], dtype=np.int64) for k in BATCH_FIELDS}
    nb = len(f["base_offset"])
    _check_layout(starts, len(rows), nb)
    if len(deltas) != len(rows) or (len(deltas) and (deltas.min() < 0
                                                     or deltas.max() > _INT32_MAX)):
        raise InvalidOptionError("rebuild_batches: one offset delta in [0, 2^31) per row")
    attrs = f["attributes"]
    codec_of = attrs & ATTR_CODEC_MASK
    horizon = (attrs & ATTR_DELETE_HORIZON) != 0
    out: list[bytes | None] = [None] * nb
    crc32c = _crc32c_fn()
    for cid in np.unique(codec_of):
        sel = np.flatnonzero(codec_of == cid)
        counts = starts[sel + 1] - starts[sel]
        take = _ranges(starts[sel], counts)
        sub_starts = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        enc, n = make_encoder(table, rows[take], now_ms)
        bts = np.zeros(n, dtype=np.int64)
        first_ts = _first_timestamps(table, rows[take][sub_starts[:-1]])
        bts[sub_starts[:-1]] = np.where(horizon[sel], f["base_timestamp"][sel], first_ts)
        enc.set_batches(sub_starts, np.ascontiguousarray(deltas[take]), bts)
        if int(cid) == CODEC_NONE:
            data = enc.layout_uncompressed()
            enc.fill_uncompressed(0, len(sel), 0, -1, crc32c)
            pos = np.frombuffer(enc.uncompressed_index(0)[0], dtype=np.int64)
            pieces = [(int(p), int(q)) for p, q in zip(pos, np.append(pos[1:], len(data)))]
        else:
            data, index = enc.compress_range(0, len(sel), codecs.compressor(int(cid), None),
                                             crc32c, _INT32_MAX, 0, -1, int(cid))
            pieces = [(at, at + size) for at, size, *_ in index]
            if len(pieces) != len(sel):
                raise InvalidOptionError("rebuild_batches: a batch was split")
        mv = memoryview(data)
        for k, b in enumerate(sel):
            lo, hi = pieces[k]
            buf = bytearray(mv[lo:hi])
            _, length, _, _, _, _, _, base_ts, max_ts, _, _, _, count = \
                V2_HEADER.unpack_from(buf, 0)
            a = int(attrs[b])
            if a & ATTR_TIMESTAMP_TYPE:
                max_ts = int(f["max_timestamp"][b])
            V2_HEADER.pack_into(buf, 0, int(f["base_offset"][b]), length,
                                int(f["leader_epoch"][b]), 2, 0, a,
                                int(f["last_offset"][b] - f["base_offset"][b]), base_ts,
                                max_ts, int(f["producer_id"][b]),
                                int(f["producer_epoch"][b]), int(f["base_sequence"][b]),
                                count)
            _seal(buf, crc32c)
            out[b] = bytes(buf)
        del mv, data
    return out  # type: ignore[return-value]


def _ranges(begins: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(b, b + c)`` for each pair, without a Python loop."""
    total = int(counts.sum())
    idx = np.ones(total, dtype=np.int64)
    ends = np.cumsum(counts)
    idx[0] = begins[0]
    if len(begins) > 1:
        idx[ends[:-1]] = begins[1:] - (begins[:-1] + counts[:-1] - 1)
    return np.cumsum(idx)


def _first_timestamps(table, rows: np.ndarray) -> np.ndarray:
    """Epoch ms of ``table``'s timestamp column at ``rows`` (decoded rows: timestamp[us])."""
    col = table.column("timestamp")
    vals = pc.take(col, pa.array(rows)).cast(pa.int64())
    us = np.asarray(vals.to_numpy(zero_copy_only=False), dtype=np.int64)
    return np.floor_divide(us, 1000)

