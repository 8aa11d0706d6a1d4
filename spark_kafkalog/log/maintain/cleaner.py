"""Kafka's log-cleaner decisions for one partition, from its batch headers (no I/O).

Which segments (``LogCleanerManager``): :func:`first_too_young` (``min.compaction.lag.ms``
bounds the cleanable range) and :func:`compaction_delay` (``max.compaction.lag.ms``
forces a cleaning whatever the dirty ratio).

What ``Cleaner.cleanInto`` and ``CleanedTransactionMetadata`` decide per batch, in
offset order over the segments being cleaned:

- a transactional data batch of an aborted transaction (found, as Kafka finds them
  through ``.txnindex``, from the transaction markers: the producer's next marker is an
  ABORT) is discarded; one of a committed transaction is not;
- an ABORT marker is discardable when no batch of its transaction was read in this
  pass (its data is gone), else kept and its aborted-transaction entry goes to the new
  ``.txnindex``; a COMMIT marker is discardable when no batch of its transaction was
  read; other control records never are; a discardable marker is first kept with the
  delete horizon set and removed once ``now >= horizon``;
- batch retention: a producer's last batch (last data batch of its latest epoch, or its
  latest marker when that epoch wrote no data) and the batch ending the cleaning round
  are kept even when emptied (``RETAIN_EMPTY``); other emptied batches go.

Records: the latest record of each key (the offset map, built over the cleaned range
from data batches that are not aborted) is kept, a tombstone only while its batch has no
delete horizon or ``now`` is before it; a record without a key is removed (Kafka counts
it as an invalid message).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from spark_kafkalog.format.wire import CONTROL_ABORT, CONTROL_COMMIT

__all__ = ["DELETE", "DELETE_EMPTY", "RETAIN_EMPTY", "TxnScan", "scan_transactions",
           "first_unstable_offset",
           "batch_decisions", "OffsetMap", "first_too_young", "compaction_delay"]

DELETE, DELETE_EMPTY, RETAIN_EMPTY = 0, 1, 2


@dataclass
class TxnScan:
    """Transactions of the whole partition, from its batch headers."""
    #: (producer id, first offset, marker offset, last stable offset) per ABORT, in
    #: marker order (what Kafka's ``.txnindex`` files hold)
    aborted: list = field(default_factory=list)
    #: first offset of the earliest transaction still open at the log end, None if none
    first_unstable: int | None = None
    #: (first offset, marker offset) of every decided transaction, in marker order
    decided: list = field(default_factory=list)
    #: producer id -> (its latest epoch, last offset of its last data batch of that
    #: epoch or None)
    last_of_producer: dict = field(default_factory=dict)


def first_unstable_offset(txns: TxnScan, high_watermark: int | None) -> int | None:
    """Kafka's first unstable offset (``ProducerStateManager.firstUnstableOffset``): the
    first offset of the earliest transaction that is undecided, or decided by a marker
    at or above the high watermark (not yet replicated: its outcome may still be
    truncated away). ``high_watermark`` None: every marker counts as replicated."""
    firsts = [] if txns.first_unstable is None else [txns.first_unstable]
    if high_watermark is not None:
        firsts += [f for f, marker in txns.decided if marker >= high_watermark]
    return min(firsts) if firsts else None


def scan_transactions(h: dict) -> TxnScan:
    """``h``: numpy header columns of every batch of the partition, in offset order
    (``producer_id``, ``producer_epoch``, ``base_offset``, ``last_offset``,
    ``is_transactional``, ``is_control``, ``control_type``)."""
    out = TxnScan()
    pid, epoch = h["producer_id"], h["producer_epoch"]
    txn, ctrl = h["is_transactional"], h["is_control"]
    base, last, ctype = h["base_offset"], h["last_offset"], h["control_type"]
    open_first: dict[int, int] = {}
    for i in np.flatnonzero(txn | ctrl):
        p = int(pid[i])
        if ctrl[i]:
            first = open_first.pop(p, int(base[i]))
            out.decided.append((first, int(last[i])))
            if int(ctype[i]) == CONTROL_ABORT:
                lso = min(open_first.values()) if open_first else int(last[i]) + 1
                out.aborted.append((p, first, int(last[i]), lso))
        elif p not in open_first:
            open_first[p] = int(base[i])
    out.first_unstable = min(open_first.values()) if open_first else None
    for i in np.flatnonzero(pid >= 0):
        p, e = int(pid[i]), int(epoch[i])
        cur = out.last_of_producer.get(p)
        if cur is None or cur[0] != e:
            cur = (e, None)
        if not ctrl[i]:
            cur = (e, int(last[i]))
        out.last_of_producer[p] = cur
    return out


def batch_decisions(h: dict, n: int, txns: TxnScan, upto: int):
    """For the first ``n`` batches of ``h`` (those being cleaned, ending the round at
    offset ``upto``): ``(discard, retention, empty_txn_marker, index_entries)`` —
    ``discard[i]``: the batch's records all go (aborted data, a marker whose horizon
    passed); ``retention[i]``: DELETE / DELETE_EMPTY / RETAIN_EMPTY; ``empty_txn_marker``:
    a marker that may go once its delete horizon passes (it gets one if it has none);
    ``index_entries[i]``: the aborted-transaction entry a kept ABORT marker carries into
    the new ``.txnindex``."""
    pid, epoch = h["producer_id"][:n], h["producer_epoch"][:n]
    txn, ctrl = h["is_transactional"][:n], h["is_control"][:n]
    last, ctype = h["last_offset"][:n], h["control_type"][:n]
    count, attrs, horizon = h["record_count"][:n], h["attributes"][:n], h["horizon"][:n]
    now = h["now"]
    can_discard = np.zeros(n, dtype=bool)
    index_entries: dict[int, tuple] = {}
    pending = sorted(txns.aborted, key=lambda a: a[1])
    k = 0
    ongoing_aborted: dict[int, list] = {}      # pid -> [entry, observed]
    ongoing_committed: set[int] = set()
    for i in np.flatnonzero(txn | ctrl):
        while k < len(pending) and pending[k][1] <= last[i]:
            ongoing_aborted.setdefault(pending[k][0], [pending[k], False])
            k += 1
        p = int(pid[i])
        if ctrl[i]:
            if count[i] == 0:
                can_discard[i] = True          # an emptied marker was already cleaned
            elif int(ctype[i]) == CONTROL_ABORT:
                meta = ongoing_aborted.pop(p, None)
                if meta is not None and meta[1]:
                    index_entries[int(i)] = meta[0]
                else:
                    can_discard[i] = True
            elif int(ctype[i]) == CONTROL_COMMIT:
                can_discard[i] = p not in ongoing_committed
                ongoing_committed.discard(p)
        elif txn[i]:
            meta = ongoing_aborted.get(p)
            if meta is not None:
                meta[1] = True
                can_discard[i] = True
            else:
                ongoing_committed.add(p)
    has_horizon = (attrs & 0x40) != 0
    discard = np.where(ctrl, can_discard & has_horizon & (horizon <= now), can_discard)
    last_of = np.zeros(n, dtype=bool)
    for i in np.flatnonzero(pid >= 0):
        info = txns.last_of_producer.get(int(pid[i]))
        if info is None:
            continue
        if info[1] is not None:
            last_of[i] = int(last[i]) == info[1]
        else:
            last_of[i] = bool(ctrl[i]) and int(epoch[i]) == info[0]
    retention = np.where(discard, DELETE, DELETE_EMPTY)
    retention[(last + 1 == upto)] = RETAIN_EMPTY
    retention[last_of] = RETAIN_EMPTY
    empty_txn_marker = can_discard & ctrl
    return discard, retention, empty_txn_marker, index_entries


class OffsetMap:
    """Key -> offset of its latest record, built window by window with Arrow's hash
    aggregation (no per-record Python); memory is one entry per distinct key."""

    def __init__(self):
        self._table: pa.Table | None = None

    def add(self, keys: pa.Array, offsets: pa.Array) -> None:
        t = pa.table({"key": keys, "offset": offsets}).filter(
            pa.compute.is_valid(keys))
        if self._table is not None:
            t = pa.concat_tables([self._table, t])
        self._table = t.group_by("key").aggregate([("offset", "max")]).rename_columns(
            ["key", "offset"])

    def __len__(self) -> int:
        return 0 if self._table is None else self._table.num_rows

    def latest_offsets(self) -> np.ndarray:
        """Sorted offsets of every key's latest record."""
        if self._table is None:
            return np.zeros(0, dtype=np.int64)
        return np.sort(self._table.column("offset").to_numpy())


# ---- which segments ----------------------------------------------------------------------
def _dirty_segments(h: dict, bases: list[int], dirty_from: int):
    """``(segment number, its batches' slice)`` of the dirty segments before the active
    one (those ending past ``dirty_from``); ``h["segment"]`` numbers each batch's
    segment, in order."""
    seg_of = h["segment"]
    for i in range(len(bases) - 1):
        if bases[i + 1] > dirty_from:
            yield i, slice(int(np.searchsorted(seg_of, i)),
                           int(np.searchsorted(seg_of, i, side="right")))


def first_too_young(h: dict, bases: list[int], dirty_from: int, now: int,
                    min_lag_ms: int) -> int | None:
    """The base offset of the first dirty segment whose largest timestamp is within
    ``min_lag_ms`` of ``now`` (cleaning stops there); None when none is or the lag is 0."""
    if min_lag_ms <= 0:
        return None
    for i, sl in _dirty_segments(h, bases, dirty_from):
        ts = h["max_timestamp"][sl]
        if len(ts) and int(ts.max()) > now - min_lag_ms:
            return bases[i]
    return None


def compaction_delay(h: dict, bases: list[int], dirty_from: int, now: int,
                     max_lag_ms: int) -> int:
    """``LogCleanerManager.maxCompactionDelay``: how far the earliest first-batch
    timestamp (its ``max_timestamp``, as ``LogSegment.getFirstBatchTimestamp``) of the
    dirty segments lies before ``now - max_lag_ms``; 0 when it does not (> 0: the log
    must be compacted now). Segments without a batch or a positive timestamp do not
    count."""
    firsts = [int(h["max_timestamp"][sl.start]) for _, sl in
              _dirty_segments(h, bases, dirty_from) if sl.stop > sl.start]
    firsts = [t for t in firsts if t > 0]
    until = now - max_lag_ms
    return until - min(firsts) if firsts and min(firsts) < until else 0
