"""Transactions on disk: ``.txnindex`` files and producer-state ``.snapshot`` files,
parsed and built (layouts below)."""
# ``.txnindex`` (Kafka's TransactionIndex; one per segment, created when the segment gets
# its first aborted transaction, never preallocated)::
#
#     AbortedTxn =>
#       version          int16   0
#       producerId       int64
#       firstOffset      int64   first offset of the aborted transaction
#       lastOffset       int64   offset of its ABORT marker
#       lastStableOffset int64   the partition's LSO when the marker was written
#
# An entry sits in the segment holding its ABORT marker. A transactional batch of producer
# P starting at offset b is aborted iff some entry of P has ``firstOffset <= b <= lastOffset``.
#
# ``<offset>.snapshot`` (ProducerStateManager, message ProducerSnapshot v1)::
#
#     version int16 (1), crc uint32 (CRC-32C of everything after it),
#     entries: int32 count, then per producer
#       producerId int64, epoch int16, lastSequence int32, lastOffset int64,
#       offsetDelta int32, timestamp int64, coordinatorEpoch int32,
#       currentTxnFirstOffset int64 (-1 when no transaction is open)
#
# It is the producer state as of ``offset`` (everything below it applied); a broker writes
# one when it rolls a segment and when it shuts down cleanly.
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import pyarrow.fs as pafs

from spark_kafkalog.errors import LogLayoutError, TxnIndexError
from spark_kafkalog.log.io import read_listed

__all__ = [
    "ABORTED_TXN", "TXN_INDEX_VERSION", "AbortedTxns", "read_txn_index",
    "parse_txn_index", "encode_txn_index", "ProducerSnapshot", "parse_producer_snapshot",
    "read_producer_snapshot", "encode_producer_snapshot", "SNAPSHOT_ENTRY",
]

#: version int16, producerId int64, firstOffset int64, lastOffset int64, lastStableOffset int64
ABORTED_TXN = struct.Struct(">hqqqq")          # 34 bytes
TXN_INDEX_VERSION = 0
_TXN_DTYPE = np.dtype([("version", ">i2"), ("producer_id", ">i8"), ("first_offset", ">i8"),
                       ("last_offset", ">i8"), ("last_stable_offset", ">i8")])

#: version int16, crc uint32, entry count int32
SNAPSHOT_HEADER = struct.Struct(">hIi")
SNAPSHOT_CRC_FROM = struct.calcsize(">hI")     # CRC covers bytes from here on
#: producerId, epoch, lastSequence, lastOffset, offsetDelta, timestamp, coordinatorEpoch,
#: currentTxnFirstOffset
SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")    # 46 bytes
SNAPSHOT_VERSION = 1

_MAX_TXN_INDEX_BYTES = 256 * 1024 * 1024
_MAX_SNAPSHOT_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class AbortedTxns:
    """Aborted transactions as parallel int64 numpy arrays (one element per entry)."""
    producer_id: np.ndarray
    first_offset: np.ndarray
    last_offset: np.ndarray
    last_stable_offset: np.ndarray

    def __len__(self) -> int:
        return len(self.producer_id)

    @staticmethod
    def empty() -> "AbortedTxns":
        z = np.zeros(0, dtype=np.int64)
        return AbortedTxns(z, z, z, z)

    @staticmethod
    def concat(parts: list["AbortedTxns"]) -> "AbortedTxns":
        parts = [p for p in parts if len(p)]
        if not parts:
            return AbortedTxns.empty()
        return AbortedTxns(*(np.concatenate([getattr(p, f) for p in parts])
                             for f in ("producer_id", "first_offset", "last_offset",
                                       "last_stable_offset")))

    def entries(self) -> list[tuple[int, int, int, int, int]]:
        """``[(version, producer_id, first_offset, last_offset, last_stable_offset)]``."""
        return [(TXN_INDEX_VERSION, int(a), int(b), int(c), int(d)) for a, b, c, d in
                zip(self.producer_id, self.first_offset, self.last_offset,
                    self.last_stable_offset)]

    def select(self, mask: np.ndarray) -> "AbortedTxns":
        return AbortedTxns(self.producer_id[mask], self.first_offset[mask],
                           self.last_offset[mask], self.last_stable_offset[mask])


def parse_txn_index(data: bytes, path: str = "<txnindex>", *,
                    segment_base_offset: int | None = None,
                    next_base_offset: int | None = None) -> AbortedTxns:
    """Decode ``.txnindex`` bytes. A trailing partial entry (a crash mid-append) is
    ignored. Entries that cannot be what a broker wrote (unknown version, first offset
    after the marker, a marker outside the segment) raise :class:`TxnIndexError` naming
    the byte position."""
    n = len(data) // ABORTED_TXN.size
    raw = np.frombuffer(data, dtype=_TXN_DTYPE, count=n)
    result = AbortedTxns(raw["producer_id"].astype(np.int64),
                         raw["first_offset"].astype(np.int64),
                         raw["last_offset"].astype(np.int64),
                         raw["last_stable_offset"].astype(np.int64))
    bad = raw["version"] != TXN_INDEX_VERSION
    bad |= (result.first_offset < 0) | (result.first_offset > result.last_offset)
    bad |= result.producer_id < 0
    if segment_base_offset is not None:
        bad |= result.last_offset < segment_base_offset
    if next_base_offset is not None:
        bad |= result.last_offset >= next_base_offset
    where = np.flatnonzero(bad)
    if len(where):
        i = int(where[0])
        raise TxnIndexError(
            f"invalid aborted-transaction entry {i}: version {int(raw['version'][i])}, "
            f"producer {int(result.producer_id[i])}, offsets {int(result.first_offset[i])}.."
            f"{int(result.last_offset[i])}", path=path, position=i * ABORTED_TXN.size,
            offset=int(result.last_offset[i]))
    return result


def read_txn_index(fs: pafs.FileSystem, path: str, *, segment_base_offset: int | None = None,
                   next_base_offset: int | None = None) -> AbortedTxns | None:
    """Entries of a ``.txnindex`` file; None when the file does not exist."""
    data = read_listed(fs, path, _MAX_TXN_INDEX_BYTES)
    if data is None:
        return None
    return parse_txn_index(data, path, segment_base_offset=segment_base_offset,
                           next_base_offset=next_base_offset)


def encode_txn_index(entries) -> bytes:
    """``.txnindex`` bytes for ``[(producer_id, first_offset, last_offset,
    last_stable_offset), ...]``."""
    out = bytearray()
    for producer_id, first, last, lso in entries:
        if first > last:
            raise LogLayoutError(f"aborted transaction first offset {first} after its marker "
                                 f"{last}", position=len(out), offset=last)
        out += ABORTED_TXN.pack(TXN_INDEX_VERSION, producer_id, first, last, lso)
    return bytes(out)


# ---- producer snapshots --------------------------------------------------------------

@dataclass(frozen=True)
class ProducerSnapshot:
    """Producer state as of ``offset``: per producer id, the first offset of its open
    transaction (producers without one are left out) and its last written offset."""
    offset: int
    open_txn_first_offset: dict[int, int]
    last_offset: dict[int, int]


def parse_producer_snapshot(data: bytes, offset: int, path: str = "<snapshot>"
                            ) -> ProducerSnapshot:
    """Decode a producer ``.snapshot`` file, checking its version and CRC-32C."""
    import crc32c

    if len(data) < SNAPSHOT_HEADER.size:
        raise TxnIndexError(f"producer snapshot is {len(data)} bytes, shorter than its header",
                            path=path)
    version, crc, count = SNAPSHOT_HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise TxnIndexError(f"unsupported producer snapshot version {version}", path=path)
    computed = crc32c.crc32c(memoryview(data)[SNAPSHOT_CRC_FROM:])
    if computed != crc:
        raise TxnIndexError(f"producer snapshot CRC mismatch (stored {crc:#010x}, computed "
                            f"{computed:#010x})", path=path)
    if count < 0 or SNAPSHOT_HEADER.size + count * SNAPSHOT_ENTRY.size != len(data):
        raise TxnIndexError(f"producer snapshot announces {count} entries but is "
                            f"{len(data)} bytes", path=path)
    open_txns: dict[int, int] = {}
    last: dict[int, int] = {}
    for i in range(count):
        at = SNAPSHOT_HEADER.size + i * SNAPSHOT_ENTRY.size
        (pid, _epoch, _seq, last_offset, _delta, _ts, _coord,
         txn_first) = SNAPSHOT_ENTRY.unpack_from(data, at)
        last[pid] = last_offset
        if txn_first >= 0:
            open_txns[pid] = txn_first
    return ProducerSnapshot(offset, open_txns, last)


def read_producer_snapshot(fs: pafs.FileSystem, path: str, offset: int
                           ) -> ProducerSnapshot | None:
    data = read_listed(fs, path, _MAX_SNAPSHOT_BYTES)
    if data is None:
        return None
    return parse_producer_snapshot(data, offset, path)


def encode_producer_snapshot(entries) -> bytes:
    """Snapshot bytes for ``[(producer_id, epoch, last_sequence, last_offset, offset_delta,
    timestamp, coordinator_epoch, current_txn_first_offset), ...]``."""
    import crc32c

    body = struct.pack(">i", len(entries)) + b"".join(SNAPSHOT_ENTRY.pack(*e) for e in entries)
    return struct.pack(">hI", SNAPSHOT_VERSION, crc32c.crc32c(body)) + body
