"""Build Kafka log directories for tests, with the records a consumer should see.

Batches are encoded by independent implementations — kafka-python's and aiokafka's
record builders — and then placed the way a broker places them: base offset and
partition leader epoch written into the header (the CRC does not cover them), control
batches (transaction markers) and LogAppendTime flagged with the CRC recomputed, legacy
compressed wrappers given the last inner offset. Segments, ``.index`` / ``.timeindex``
(one entry per ``index_interval_bytes`` as a broker appends them, optionally zero-padded
like a preallocated active segment), ``.txnindex``, producer ``.snapshot`` files,
``leader-epoch-checkpoint`` and the root checkpoint files are written as a broker writes
them. Nothing here uses ``spark_kafkalog``, so it is an oracle for it.

The builder also keeps the ground truth: every data record with its offset, key, value,
timestamp, headers and transaction fate, so :meth:`PartitionBuilder.expected` returns
what a consumer at a given isolation level would read between the log start offset and
the high watermark (or the last stable offset).

Typical use::

    b = LogDirBuilder(tmp_path / "logs")
    p = b.partition("a.b-c_d", 0)
    p.append([rec(b"k", b"v", ts=1000)] * 10, compression="gzip")
    p.roll()
    txn = p.begin_txn(producer_id=7)
    p.append([rec(None, b"x")], txn=txn)
    p.end_txn(txn, commit=False)
    p.high_watermark = p.log_end_offset
    b.write()
    table = p.expected_table("read_committed")

Ready-made: :func:`build_rich_partition` (every kind of batch, transactions, a log start
inside the first segment, a high watermark below the log end) — plant faults in it with
:func:`flip_byte` / :func:`tear_tail` and its ``PartitionBuilder.batches`` positions.
Large logs for I/O and memory measurements: :func:`write_large_partition`.
"""
from __future__ import annotations

import os
import shutil
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import crc32c

__all__ = [
    "rec", "Rec", "BatchInfo", "Txn", "PartitionBuilder", "LogDirBuilder",
    "encode_v2_batch", "encode_control_batch", "encode_legacy", "flip_byte", "tear_tail",
    "write_large_partition", "CODECS", "segment_name", "sample_records",
    "build_rich_partition", "copy_partition_dir",
]

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

# v2 header positions (Kafka DefaultRecordBatch)
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH_POS = 12
_CRC_POS = 17
_ATTR_POS = 21
_LAST_DELTA_POS = 23
_MAX_TS_POS = 35
_ATTR_LOG_APPEND_TIME = 0x08
_ATTR_CONTROL = 0x20
# legacy message positions
_LEGACY_CRC_POS = 12
_LEGACY_MAGIC_POS = 16
_LEGACY_ATTR_POS = 17
_LEGACY_TS_POS = 18


def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass
class Rec:
    """A record to append. ``ts`` None means "base timestamp + position"."""
    key: bytes | None
    value: bytes | None
    ts: int | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def rec(key=None, value=None, ts=None, headers=None) -> Rec:
    return Rec(key, value, ts, list(headers or []))


@dataclass
class Txn:
    producer_id: int
    producer_epoch: int
    first_offset: int | None = None
    marker_offset: int | None = None
    committed: bool | None = None          # None while open


@dataclass
class BatchInfo:
    """Where a batch went: segment base offset, byte position, size, offsets."""
    segment: int
    position: int
    size: int
    base_offset: int
    last_offset: int
    magic: int
    control: bool
    max_timestamp: int


@dataclass
class _Row:
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int            # ms; -1 none
    timestamp_type: int       # 0 create, 1 log append, -1 none (magic 0)
    headers: list | None
    txn: Txn | None


# ---- batch encoders ------------------------------------------------------------------

def _builder(encoder: str, compression: str, transactional: bool, producer_id: int,
             producer_epoch: int, base_sequence: int):
    codec = CODECS[compression]
    if encoder == "kafka-python":
        from kafka.record.default_records import DefaultRecordBatchBuilder
        return DefaultRecordBatchBuilder(2, codec, int(transactional), producer_id,
                                         producer_epoch, base_sequence, 1 << 30)
    if encoder == "aiokafka":
        from aiokafka.record.default_records import DefaultRecordBatchBuilder
        return DefaultRecordBatchBuilder(2, codec, int(transactional), producer_id,
                                         producer_epoch, base_sequence, 1 << 30)
    raise ValueError(f"unknown encoder {encoder!r}")


def _place_v2(buf: bytearray, base_offset: int, leader_epoch: int) -> bytes:
    """What a broker does to a produced batch: set baseOffset and partitionLeaderEpoch
    (neither is covered by the CRC)."""
    _BASE_OFFSET.pack_into(buf, 0, base_offset)
    struct.pack_into(">i", buf, _LEADER_EPOCH_POS, leader_epoch)
    return bytes(buf)


def _recrc_v2(buf: bytearray) -> None:
    struct.pack_into(">I", buf, _CRC_POS, crc32c.crc32c(bytes(buf[_ATTR_POS:])))


def encode_v2_batch(records: Sequence[tuple[int, int, bytes | None, bytes | None, list]],
                    *, base_offset: int, compression: str = "none", producer_id: int = -1,
                    producer_epoch: int = -1, base_sequence: int = -1,
                    transactional: bool = False, leader_epoch: int = 0,
                    encoder: str = "kafka-python", log_append_time: int | None = None,
                    last_offset_delta: int | None = None) -> bytes:
    """One v2 batch. ``records``: ``(offset_delta, timestamp, key, value, headers)``.
    ``log_append_time`` sets the LogAppendTime flag and maxTimestamp like a broker with
    ``message.timestamp.type=LogAppendTime``. ``last_offset_delta`` overrides the header
    field (an empty batch left by compaction keeps the offsets it covered)."""
    b = _builder(encoder, compression, transactional, producer_id, producer_epoch,
                 base_sequence)
    for delta, ts, key, value, headers in records:
        if encoder == "aiokafka":
            b.append(delta, timestamp=ts, key=key, value=value, headers=headers)
        else:
            b.append(delta, ts, key, value, headers)
    buf = bytearray(b.build())
    patched = False
    if log_append_time is not None:
        buf[_ATTR_POS + 1] |= _ATTR_LOG_APPEND_TIME
        struct.pack_into(">q", buf, _MAX_TS_POS, log_append_time)
        patched = True
    if last_offset_delta is not None:
        struct.pack_into(">i", buf, _LAST_DELTA_POS, last_offset_delta)
        patched = True
    if patched:
        _recrc_v2(buf)
    return _place_v2(buf, base_offset, leader_epoch)


def encode_control_batch(*, base_offset: int, producer_id: int, producer_epoch: int,
                         commit: bool, coordinator_epoch: int = 0, timestamp: int = 0,
                         leader_epoch: int = 0, control_type: int | None = None) -> bytes:
    """A transaction marker as a broker writes it: a transactional v2 batch with the
    control flag, one record with key ``version int16 (0), type int16`` (0 ABORT,
    1 COMMIT) and value ``version int16 (0), coordinatorEpoch int32``."""
    ctype = (1 if commit else 0) if control_type is None else control_type
    key = struct.pack(">hh", 0, ctype)
    value = struct.pack(">hi", 0, coordinator_epoch)
    b = _builder("kafka-python", "none", True, producer_id, producer_epoch, -1)
    b.append(0, timestamp, key, value, [])
    buf = bytearray(b.build())
    buf[_ATTR_POS + 1] |= _ATTR_CONTROL
    _recrc_v2(buf)
    return _place_v2(buf, base_offset, leader_epoch)


def _recrc_legacy(buf: bytearray, start: int = 0) -> None:
    struct.pack_into(">I", buf, start + _LEGACY_CRC_POS,
                     zlib.crc32(bytes(buf[start + _LEGACY_MAGIC_POS:])) & 0xFFFFFFFF)


def encode_legacy(magic: int, records: Sequence[tuple[int, int, bytes | None, bytes | None]],
                  *, compression: str = "none", log_append_time: int | None = None) -> bytes:
    """Magic 0/1 messages with absolute offsets ``(offset, timestamp, key, value)``.

    Uncompressed: one message per record. Compressed: one wrapper whose offset is the last
    inner offset; inner offsets are absolute for magic 0 and relative (0..n-1) for magic 1,
    and a magic 1 wrapper carries the max inner timestamp (CreateTime) or the append time
    (LogAppendTime, flag set on the wrapper), as a broker stores them."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    codec = CODECS[compression]
    b = LegacyRecordBatchBuilder(magic, codec, 1 << 30)
    first = records[0][0]
    for offset, ts, key, value in records:
        inner_offset = offset - first if (codec and magic == 1) else offset
        b.append(inner_offset, timestamp=ts if magic else None, key=key, value=value)
    buf = bytearray(b.build())
    if codec == 0:
        if log_append_time is not None and magic == 1:
            pos = 0
            while pos < len(buf):
                size = struct.unpack_from(">i", buf, pos + 8)[0]
                buf[pos + _LEGACY_ATTR_POS] |= _ATTR_LOG_APPEND_TIME
                struct.pack_into(">q", buf, pos + _LEGACY_TS_POS, log_append_time)
                msg = bytearray(buf[pos:pos + 12 + size])
                _recrc_legacy(msg)
                buf[pos:pos + 12 + size] = msg
                pos += 12 + size
        return bytes(buf)
    _BASE_OFFSET.pack_into(buf, 0, records[-1][0])
    if magic == 1:
        if log_append_time is not None:
            buf[_LEGACY_ATTR_POS] |= _ATTR_LOG_APPEND_TIME
            wrapper_ts = log_append_time
        else:
            wrapper_ts = max(r[1] for r in records)
        struct.pack_into(">q", buf, _LEGACY_TS_POS, wrapper_ts)
        _recrc_legacy(buf)
    return bytes(buf)


# ---- partitions ----------------------------------------------------------------------

class PartitionBuilder:
    """Appends batches to a partition's segments in memory, then writes its directory.

    Offsets are assigned like a broker assigns them (each batch takes the next offsets;
    ``gap`` leaves holes as compaction does). ``roll`` starts a new segment at the next
    offset. Segment, index and checkpoint options are attributes set before ``write``.
    """

    def __init__(self, topic: str, partition: int, *, base_offset: int = 0,
                 index_interval_bytes: int = 4096, base_timestamp: int = 1_700_000_000_000):
        self.topic = topic
        self.partition = partition
        self.index_interval_bytes = index_interval_bytes
        self.base_timestamp = base_timestamp
        self.segments: list[tuple[int, bytearray]] = [(base_offset, bytearray())]
        self.batches: list[BatchInfo] = []
        self.rows: list[_Row] = []
        self.txns: list[Txn] = []
        self.next_offset = base_offset
        self.leader_epoch = 0
        self.epochs: list[tuple[int, int]] = [(0, base_offset)]
        # what ``write`` produces (None = no checkpoint entry)
        self.high_watermark: int | None = None
        self.log_start_offset: int | None = None
        self.write_index = True
        self.write_timeindex = True
        self.write_txnindex = True
        self.preallocate_active_index: int = 0      # bytes of zero padding, 0 = trimmed
        self.snapshot_at_end = False
        self._open: dict[int, Txn] = {}

    # -- appending --

    @property
    def log_end_offset(self) -> int:
        return self.next_offset

    def gap(self, n: int) -> None:
        """Leave ``n`` offsets unused (what compaction leaves between batches)."""
        self.next_offset += n

    def roll(self) -> None:
        """Start a new segment at the next offset."""
        if not self.segments[-1][1]:
            raise ValueError("rolling an empty segment")
        self.segments.append((self.next_offset, bytearray()))

    def bump_leader_epoch(self) -> None:
        self.leader_epoch += 1
        self.epochs.append((self.leader_epoch, self.next_offset))

    def _add(self, data: bytes, base: int, last: int, magic: int, control: bool,
             max_ts: int) -> BatchInfo:
        seg_base, buf = self.segments[-1]
        info = BatchInfo(seg_base, len(buf), len(data), base, last, magic, control, max_ts)
        buf += data
        self.batches.append(info)
        self.next_offset = last + 1
        return info

    def _timestamps(self, records: Sequence[Rec]) -> list[int]:
        out = []
        for i, r in enumerate(records):
            out.append(r.ts if r.ts is not None else self.base_timestamp + self.next_offset + i)
        return out

    def append(self, records: Sequence[Rec], *, compression: str = "none",
               offset_deltas: Sequence[int] | None = None, txn: Txn | None = None,
               producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
               encoder: str = "kafka-python", log_append_time: int | None = None
               ) -> BatchInfo:
        """Append one v2 batch. ``offset_deltas`` (increasing, starting anywhere >= 0)
        leaves compaction gaps inside the batch. A ``txn`` makes it transactional."""
        if not records:
            raise ValueError("use empty_batch for a batch without records")
        deltas = list(offset_deltas) if offset_deltas is not None else list(range(len(records)))
        if len(deltas) != len(records) or any(b <= a for a, b in zip(deltas, deltas[1:])):
            raise ValueError("offset_deltas must be increasing, one per record")
        base = self.next_offset
        ts = self._timestamps(records)
        if txn is not None:
            producer_id, producer_epoch = txn.producer_id, txn.producer_epoch
            if txn.first_offset is None:
                txn.first_offset = base
        data = encode_v2_batch(
            [(d, t, r.key, r.value, r.headers) for d, t, r in zip(deltas, ts, records)],
            base_offset=base, compression=compression, producer_id=producer_id,
            producer_epoch=producer_epoch, base_sequence=base_sequence,
            transactional=txn is not None, leader_epoch=self.leader_epoch, encoder=encoder,
            log_append_time=log_append_time)
        ttype = 1 if log_append_time is not None else 0
        for d, t, r in zip(deltas, ts, records):
            self.rows.append(_Row(base + d, r.key, r.value,
                                  log_append_time if log_append_time is not None else t,
                                  ttype, list(r.headers) or None, txn))
        max_ts = log_append_time if log_append_time is not None else max(ts)
        return self._add(data, base, base + deltas[-1], 2, False, max_ts)

    def empty_batch(self, n_offsets: int = 1, *, producer_id: int = 5, producer_epoch: int = 0,
                    base_sequence: int = 0, timestamp: int | None = None) -> BatchInfo:
        """A v2 batch with no records covering ``n_offsets`` offsets: what the log cleaner
        keeps of a producer's last batch so its sequence state survives compaction."""
        base = self.next_offset
        ts = self.base_timestamp + base if timestamp is None else timestamp
        from kafka.record.default_records import DefaultRecordBatchBuilder
        b = DefaultRecordBatchBuilder(2, 0, 0, producer_id, producer_epoch, base_sequence,
                                      1 << 20)
        buf = bytearray(b.build())
        struct.pack_into(">i", buf, _LAST_DELTA_POS, n_offsets - 1)
        struct.pack_into(">qq", buf, 27, ts, ts)
        _recrc_v2(buf)
        data = _place_v2(buf, base, self.leader_epoch)
        return self._add(data, base, base + n_offsets - 1, 2, False, ts)

    def append_legacy(self, magic: int, records: Sequence[Rec], *, compression: str = "none",
                      log_append_time: int | None = None) -> BatchInfo:
        """Append magic 0 or 1 messages (one wrapper when compressed)."""
        base = self.next_offset
        ts = self._timestamps(records) if magic else [-1] * len(records)
        data = encode_legacy(magic, [(base + i, t, r.key, r.value)
                                     for i, (t, r) in enumerate(zip(ts, records))],
                             compression=compression, log_append_time=log_append_time)
        for i, (t, r) in enumerate(zip(ts, records)):
            if magic == 0:
                row_ts, ttype = -1, -1
            elif log_append_time is not None:
                row_ts, ttype = log_append_time, 1
            else:
                row_ts, ttype = t, 0
            self.rows.append(_Row(base + i, r.key, r.value, row_ts, ttype, None, None))
        last = base + len(records) - 1
        return self._add(data, base, last, magic, False, max(ts))

    # -- transactions --

    def begin_txn(self, producer_id: int, producer_epoch: int = 0) -> Txn:
        if producer_id in self._open:
            raise ValueError(f"producer {producer_id} already has an open transaction")
        txn = Txn(producer_id, producer_epoch)
        self._open[producer_id] = txn
        self.txns.append(txn)
        return txn

    def end_txn(self, txn: Txn, *, commit: bool, coordinator_epoch: int = 0) -> BatchInfo:
        """Append the COMMIT or ABORT marker of ``txn``."""
        base = self.next_offset
        ts = self.base_timestamp + base
        data = encode_control_batch(base_offset=base, producer_id=txn.producer_id,
                                    producer_epoch=txn.producer_epoch, commit=commit,
                                    coordinator_epoch=coordinator_epoch, timestamp=ts,
                                    leader_epoch=self.leader_epoch)
        txn.marker_offset = base
        txn.committed = commit
        del self._open[txn.producer_id]
        return self._add(data, base, base, 2, True, ts)

    # -- expectations --

    def open_txn_first_offsets(self, decided_below: int) -> list[int]:
        """First offsets of transactions with no marker below ``decided_below``."""
        return [t.first_offset for t in self.txns if t.first_offset is not None
                and (t.marker_offset is None or t.marker_offset >= decided_below)]

    def bounds(self, isolation_level: str = "read_uncommitted",
               read_past_high_watermark: bool = False) -> tuple[int, int]:
        """``(log start offset, upper bound)`` a consumer sees, from the builder's truth."""
        first_seg = self.segments[0][0]
        start = max(self.log_start_offset or 0, first_seg)
        leo = self.log_end_offset
        hw = leo if (read_past_high_watermark or self.high_watermark is None) \
            else max(min(self.high_watermark, leo), start)
        if isolation_level == "read_committed":
            opens = [o for o in self.open_txn_first_offsets(hw) if o < hw]
            hw = max(min(opens + [hw]), start) if opens else hw
        return start, hw

    def expected_rows(self, isolation_level: str = "read_uncommitted", *,
                      start: int | None = None, end: int | None = None,
                      read_past_high_watermark: bool = False,
                      skip_batches: Iterable[BatchInfo] = (),
                      stop_at: BatchInfo | None = None) -> list[_Row]:
        """Rows a consumer reads in ``[start, end)`` (default: log start to the upper
        bound), dropping records of ``skip_batches`` and everything from ``stop_at`` on
        (to model the skip and stop corruption policies)."""
        lo, hi = self.bounds(isolation_level, read_past_high_watermark)
        if start is not None:
            lo = max(lo, start)
        if end is not None:
            hi = min(hi, end)
        if stop_at is not None:
            hi = min(hi, stop_at.base_offset)
        _, hw = self.bounds("read_uncommitted", read_past_high_watermark)
        skipped = [(b.base_offset, b.last_offset) for b in skip_batches]
        out = []
        for r in self.rows:
            if not (lo <= r.offset < hi):
                continue
            if any(a <= r.offset <= z for a, z in skipped):
                continue
            if isolation_level == "read_committed" and r.txn is not None:
                t = r.txn
                if t.committed is False and t.marker_offset is not None and t.marker_offset < hw:
                    continue
            out.append(r)
        return out

    def expected_table(self, isolation_level: str = "read_uncommitted", *,
                       include_headers: bool = True, **kwargs):
        """``expected_rows`` as a pyarrow Table in Spark's Kafka schema."""
        import pyarrow as pa

        rows = self.expected_rows(isolation_level, **kwargs)
        fields = [
            pa.field("key", pa.binary()), pa.field("value", pa.binary()),
            pa.field("topic", pa.string()), pa.field("partition", pa.int32()),
            pa.field("offset", pa.int64()),
            pa.field("timestamp", pa.timestamp("us", tz="UTC")),
            pa.field("timestampType", pa.int32()),
        ]
        cols = {
            "key": [r.key for r in rows], "value": [r.value for r in rows],
            "topic": [self.topic] * len(rows), "partition": [self.partition] * len(rows),
            "offset": [r.offset for r in rows],
            # NO_TIMESTAMP (-1, and every magic 0 message) reads as -1 ms, as in Spark's
            # Kafka source; other timestamps as they are
            "timestamp": [r.timestamp * 1000 for r in rows],
            "timestampType": [r.timestamp_type for r in rows],
        }
        if include_headers:
            htype = pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string()),
                                                            pa.field("value", pa.binary())])))
            fields.append(pa.field("headers", htype))
            cols["headers"] = [None if r.headers is None else
                               [{"key": k, "value": v} for k, v in r.headers] for r in rows]
        schema = pa.schema(fields)
        return pa.table([pa.array(cols[f.name], type=f.type) for f in fields], schema=schema)

    def segment_batches(self, segment_base: int) -> list[BatchInfo]:
        return [b for b in self.batches if b.segment == segment_base]

    # -- files --

    @property
    def dir_name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def _index_entries(self, seg_base: int):
        """(offset index, time index) entries as a broker appends them for this segment."""
        offset_entries, time_entries = [], []
        since = 0
        max_ts, max_ts_offset = -1, -1
        last_time_ts = -1
        for b in self.segment_batches(seg_base):
            if b.max_timestamp > max_ts:
                max_ts, max_ts_offset = b.max_timestamp, b.last_offset
            if since > self.index_interval_bytes:
                offset_entries.append((b.last_offset, b.position))
                if max_ts > last_time_ts:
                    time_entries.append((max_ts, max_ts_offset))
                    last_time_ts = max_ts
                since = 0
            since += b.size
        is_active = seg_base == self.segments[-1][0]
        if not is_active and max_ts > last_time_ts:
            # onBecomeInactiveSegment appends the segment's max timestamp
            time_entries.append((max_ts, max_ts_offset))
        return offset_entries, time_entries

    def _txn_entries(self, seg_base: int, seg_end: int):
        out = []
        for t in self.txns:
            if t.committed is False and seg_base <= t.marker_offset < seg_end:
                opens = [o.first_offset for o in self.txns
                         if o is not t and o.first_offset is not None
                         and o.first_offset < t.marker_offset
                         and (o.marker_offset is None or o.marker_offset >= t.marker_offset)]
                lso = min(opens) if opens else t.marker_offset + 1
                out.append((t.producer_id, t.first_offset, t.marker_offset, lso))
        return out

    def snapshot_entries(self, at_offset: int):
        """Producer snapshot entries as of ``at_offset`` (every offset below it applied):
        per transactional producer, its last transaction begun below ``at_offset`` and
        whether that transaction is still open there."""
        entries = []
        for pid in sorted({t.producer_id for t in self.txns}):
            mine = [t for t in self.txns if t.producer_id == pid
                    and t.first_offset is not None and t.first_offset < at_offset]
            if not mine:
                continue
            cur = mine[-1]
            is_open = cur.marker_offset is None or cur.marker_offset >= at_offset
            last_off = cur.first_offset if is_open else cur.marker_offset
            entries.append((pid, cur.producer_epoch, 0, last_off, 0, self.base_timestamp, 0,
                            cur.first_offset if is_open else -1))
        return entries

    def write(self, root: Path) -> Path:
        """Write the partition dir under ``root``; returns its path."""
        d = Path(root) / self.dir_name
        d.mkdir(parents=True, exist_ok=True)
        from_offsets = [b for b, _ in self.segments] + [self.next_offset]
        for i, (seg_base, buf) in enumerate(self.segments):
            (d / segment_name(seg_base, ".log")).write_bytes(bytes(buf))
            offs, times = self._index_entries(seg_base)
            is_active = i == len(self.segments) - 1
            pad = self.preallocate_active_index if is_active else 0
            if self.write_index:
                data = b"".join(struct.pack(">ii", o - seg_base, p) for o, p in offs)
                if pad:
                    data += b"\0" * (pad - pad % 8)
                (d / segment_name(seg_base, ".index")).write_bytes(data)
            if self.write_timeindex:
                data = b"".join(struct.pack(">qi", t, o - seg_base) for t, o in times)
                if pad:
                    data += b"\0" * (pad - pad % 12)
                (d / segment_name(seg_base, ".timeindex")).write_bytes(data)
            if self.write_txnindex:
                entries = self._txn_entries(seg_base, from_offsets[i + 1])
                if entries:
                    (d / segment_name(seg_base, ".txnindex")).write_bytes(b"".join(
                        struct.pack(">hqqqq", 0, *e) for e in entries))
        if self.snapshot_at_end:
            self.write_snapshot(root)
        epochs = "".join(f"{e} {o}\n" for e, o in self.epochs)
        (d / "leader-epoch-checkpoint").write_text(f"0\n{len(self.epochs)}\n{epochs}")
        return d

    def write_snapshot(self, root: Path, at_offset: int | None = None) -> Path:
        """Write a producer-state snapshot as of ``at_offset`` (default: log end)."""
        at = self.next_offset if at_offset is None else at_offset
        entries = self.snapshot_entries(at)
        body = struct.pack(">i", len(entries)) + b"".join(
            struct.pack(">qhiqiqiq", *e) for e in entries)
        data = struct.pack(">hI", 1, crc32c.crc32c(body)) + body
        path = Path(root) / self.dir_name / segment_name(at, ".snapshot")
        path.write_bytes(data)
        return path


class LogDirBuilder:
    """Several partitions over one or more log-dir roots (JBOD), plus root checkpoints."""

    def __init__(self, *roots: Path):
        if not roots:
            raise ValueError("give at least one root")
        self.roots = [Path(r) for r in roots]
        self.parts: list[tuple[int, PartitionBuilder]] = []
        self.write_checkpoints = True

    def partition(self, topic: str, partition: int, *, root: int = 0,
                  **kwargs) -> PartitionBuilder:
        p = PartitionBuilder(topic, partition, **kwargs)
        self.parts.append((root, p))
        return p

    def write(self) -> list[Path]:
        for r in self.roots:
            r.mkdir(parents=True, exist_ok=True)
            (r / "meta.properties").write_text("version=0\nbroker.id=0\n")
        for root_i, p in self.parts:
            p.write(self.roots[root_i])
        if self.write_checkpoints:
            for i, r in enumerate(self.roots):
                mine = [p for ri, p in self.parts if ri == i]
                self._checkpoint(r / "replication-offset-checkpoint",
                                 {(p.topic, p.partition): p.high_watermark for p in mine})
                self._checkpoint(r / "log-start-offset-checkpoint",
                                 {(p.topic, p.partition): p.log_start_offset for p in mine})
                self._checkpoint(r / "recovery-point-offset-checkpoint",
                                 {(p.topic, p.partition): p.log_end_offset for p in mine})
        return self.roots

    @staticmethod
    def _checkpoint(path: Path, mapping: dict) -> None:
        entries = [(t, p, o) for (t, p), o in mapping.items() if o is not None]
        lines = ["0", str(len(entries))] + [f"{t} {p} {o}" for t, p, o in entries]
        path.write_text("\n".join(lines) + "\n")

    def uris(self) -> str:
        return ",".join(str(r) for r in self.roots)


# ---- ready-made logs ------------------------------------------------------------------

def sample_records(n: int, tag: bytes, ts0: int | None = None,
                   with_headers: bool = False) -> list[Rec]:
    """``n`` varied records: some null keys, some null values (tombstones), values of
    assorted sizes, headers (one with a null value) on every third when asked."""
    out = []
    for i in range(n):
        hdrs = [("h", b"%d" % i), ("n", None)] if with_headers and i % 3 == 0 else []
        out.append(rec(None if i % 4 == 0 else b"%s-k%d" % (tag, i),
                       None if i % 7 == 3 else b"%s-v%d-" % (tag, i) + b"x" * (i * 13 % 300),
                       ts=None if ts0 is None else ts0 + i, headers=hdrs))
    return out


def build_rich_partition(root, *, topic: str = "a.b-c_d", txnindex: bool = True,
                         snapshot: bool = False, preallocate: int = 0):
    """A partition with several segments, every kind of batch, compaction gaps, empty
    batches, transactions committed and aborted across segments, an open transaction at
    the end, a log start inside the first segment, a high watermark below the log end.
    Returns ``(LogDirBuilder, PartitionBuilder)`` after writing (``txnindex``: write
    ``.txnindex`` files; ``snapshot``: a producer snapshot at the last segment's base;
    ``preallocate``: zero-pad the active segment's index files to that many bytes)."""
    b = LogDirBuilder(root)
    p = b.partition(topic, 0, index_interval_bytes=300)
    for i, codec in enumerate(["none", "gzip", "snappy", "lz4", "zstd", "none"]):
        p.append(sample_records(8, b"a%d" % i, with_headers=True), compression=codec,
                 encoder="aiokafka" if i % 2 else "kafka-python")
    p.gap(5)                                                  # compaction gap
    p.append(sample_records(4, b"g"), offset_deltas=[0, 3, 4, 9])      # gaps in a batch
    p.empty_batch(3)
    p.roll()
    t1 = p.begin_txn(101)
    t2 = p.begin_txn(202, 3)
    p.append(sample_records(3, b"t1a"), txn=t1)
    p.append(sample_records(2, b"n1"))
    p.append(sample_records(3, b"t2a"), txn=t2, compression="gzip")
    p.append(sample_records(3, b"t1b"), txn=t1)
    p.end_txn(t1, commit=False)                               # t1 aborted
    p.append(sample_records(2, b"t2b"), txn=t2)
    p.roll()
    p.append(sample_records(5, b"lat"), log_append_time=1_800_000_000_000)
    p.end_txn(t2, commit=True)                # t2 committed, marker in the last segment
    t3 = p.begin_txn(101, 1)
    p.append(sample_records(4, b"t3"), txn=t3)
    p.end_txn(t3, commit=False)
    p.bump_leader_epoch()
    p.append(sample_records(6, b"b"), compression="lz4")
    t4 = p.begin_txn(303)
    p.append(sample_records(2, b"t4"), txn=t4)                # open at the end
    p.append(sample_records(3, b"after"))
    p.log_start_offset = 11                                   # inside the first segment
    p.high_watermark = p.log_end_offset - 1                   # below the log end
    p.write_txnindex = txnindex
    p.preallocate_active_index = preallocate
    b.write()
    if snapshot:
        # what a broker writes when it rolls a segment: the producer state at its base
        p.write_snapshot(b.roots[0], at_offset=p.segments[-1][0])
    return b, p


# ---- damage ----------------------------------------------------------------------------

def flip_byte(path: Path, position: int, mask: int = 0xFF) -> None:
    """XOR one byte of a file (corruption in place)."""
    with open(path, "r+b") as f:
        f.seek(position)
        b = f.read(1)
        f.seek(position)
        f.write(bytes([b[0] ^ mask]))


def tear_tail(path: Path, nbytes: int) -> None:
    """Cut the last ``nbytes`` of a file (a batch torn by a crash)."""
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size - nbytes)


def copy_partition_dir(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst)


# ---- large logs ------------------------------------------------------------------------

def write_large_partition(root: Path, topic: str, partition: int, *, total_bytes: int,
                          segment_bytes: int, batch_records: int = 100, value_bytes: int = 200,
                          index_interval_bytes: int = 4096, compression: str = "none",
                          base_timestamp: int = 1_700_000_000_000, ts_step: int = 1,
                          write_checkpoints: bool = True) -> dict:
    """Write a partition of about ``total_bytes`` quickly: one kafka-python batch of
    ``batch_records`` records is encoded once and repeated with rewritten base offsets
    (the CRC does not cover the base offset, so each copy stays valid; every copy keeps
    the template's timestamps, so timestamps are per batch: batch i has all records at
    ``base_timestamp + i * ts_step``, set in the header's first/max timestamp fields with
    the CRC recomputed). Indexes are written as a broker appends them.

    Returns ``{"dir", "batches", "records", "log_end_offset", "batch_size",
    "segments": [(base, path, size)], "base_timestamp", "ts_step"}``."""
    d = Path(root) / f"{topic}-{partition}"
    d.mkdir(parents=True, exist_ok=True)
    value = (b"0123456789abcdef" * (value_bytes // 16 + 1))[:value_bytes]
    template = bytearray(encode_v2_batch(
        [(i, base_timestamp, b"key-%06d" % i, value, []) for i in range(batch_records)],
        base_offset=0, compression=compression))
    size = len(template)
    # timestamp deltas are 0 inside the template: rewriting first/max timestamps moves
    # every record of the copy to the batch's timestamp.
    segments = []
    offset = 0
    batch_no = 0
    written = 0
    while written < total_bytes:
        base = offset
        seg_path = d / segment_name(base, ".log")
        idx, tidx = bytearray(), bytearray()
        since = 0
        seg_size = 0
        last_idx_ts = -1
        with open(seg_path, "wb") as f:
            chunk = bytearray()
            while seg_size + size <= segment_bytes and written < total_bytes:
                ts = base_timestamp + batch_no * ts_step
                struct.pack_into(">qq", template, 27, ts, ts)
                _recrc_v2(template)
                _BASE_OFFSET.pack_into(template, 0, offset)
                if since > index_interval_bytes:
                    idx += struct.pack(">ii", offset + batch_records - 1 - base, seg_size)
                    if ts > last_idx_ts:
                        tidx += struct.pack(">qi", ts, offset + batch_records - 1 - base)
                        last_idx_ts = ts
                    since = 0
                since += size
                chunk += template
                if len(chunk) >= 8 << 20:
                    f.write(chunk)
                    chunk = bytearray()
                seg_size += size
                written += size
                offset += batch_records
                batch_no += 1
            f.write(chunk)
        last_ts = base_timestamp + (batch_no - 1) * ts_step
        if written < total_bytes and last_ts > last_idx_ts:   # rolled: final time entry
            tidx += struct.pack(">qi", last_ts, offset - 1 - base)
        (d / segment_name(base, ".index")).write_bytes(bytes(idx))
        (d / segment_name(base, ".timeindex")).write_bytes(bytes(tidx))
        segments.append((base, seg_path, seg_size))
    if write_checkpoints:
        for name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint"):
            (Path(root) / name).write_text(f"0\n1\n{topic} {partition} {offset}\n")
    return {"dir": d, "batches": batch_no, "records": offset, "log_end_offset": offset,
            "batch_size": size, "segments": segments, "base_timestamp": base_timestamp,
            "ts_step": ts_step}
