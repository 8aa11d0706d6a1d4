"""read_committed: which batches are aborted, and the last stable offset (rules below)."""
# A transactional batch of producer P is aborted when P's next transaction marker after it
# is an ABORT, and that marker is below the decision limit (the high watermark: a marker a
# consumer cannot see yet decides nothing). Two sources give the same answer:
#
# - the ``.txnindex`` files (what a broker uses to answer fetches): aborted transactions
#   ``(P, first offset, marker offset)``; an entry sits in the segment of its marker;
# - the markers themselves (control batches), read from the log: used when the partition
#   has no ``.txnindex`` at all (e.g. a copy that kept only ``.log`` files) or when one is
#   invalid. Only the span of transactions still undecided at the end of a window is read
#   ahead, so a log without transactions costs nothing extra.
#
# Kafka creates a ``.txnindex`` only for a segment that gets an aborted transaction, so
# ``txn_index="auto"`` uses the index files when the partition has at least one (the broker
# kept them) and the markers otherwise. A transaction whose marker compaction removed (a
# committed one, after ``delete.retention.ms``) stays visible either way, as for a Kafka
# consumer.
#
# The last stable offset (LSO) is the first offset of the earliest transaction not decided
# below the decision limit (or the limit). It comes from the newest producer-state
# ``.snapshot`` at or below the limit (open transactions as of its offset) plus the batch
# headers from there to the limit; without a snapshot, from the headers of the whole log.
from __future__ import annotations

import logging
from typing import Iterable

import numpy as np

from spark_kafkalog.errors import InvalidOptionError, TxnIndexError
from spark_kafkalog.format.npview import column as _np
from spark_kafkalog.format.wire import CONTROL_ABORT, CONTROL_COMMIT
from spark_kafkalog.log.files.txn import AbortedTxns, read_producer_snapshot, read_txn_index
from spark_kafkalog.log.model import LogSource, PartitionDir
from spark_kafkalog.log.read.scan import ReadStats, Window, scan_windows
from spark_kafkalog.log.read.seek import locate

__all__ = ["TXN_INDEX_MODES", "AbortedFromIndex", "AbortedFromMarkers", "aborted_resolver",
           "last_stable_offset"]

log = logging.getLogger(__name__)

TXN_INDEX_MODES = ("auto", "use", "ignore")


def _txn_columns(h: np.ndarray):
    """(producer_id, base_offset, position, is_txn_data, is_control, control_type)."""
    return (_np(h, "producer_id"), _np(h, "base_offset"),
            _np(h, "position"), _np(h, "is_transactional"),
            _np(h, "is_control"), _np(h, "control_type"))


class AbortedFromIndex:
    """Aborted transactions from ``.txnindex`` files."""

    def __init__(self, aborted: AbortedTxns):
        self._by_pid: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        order = np.lexsort((aborted.first_offset, aborted.producer_id))
        pids = aborted.producer_id[order]
        firsts = aborted.first_offset[order]
        lasts = aborted.last_offset[order]
        for pid in np.unique(pids):
            m = pids == pid
            self._by_pid[int(pid)] = (firsts[m], lasts[m])
        self.count = len(aborted)

    @classmethod
    def load(cls, logdirs: LogSource, p: PartitionDir, segment_index: int, start_offset: int,
             end_offset: int, decision_limit: int) -> "AbortedFromIndex":
        """Entries that can concern ``[start_offset, end_offset)``: markers at or after
        start, transactions beginning before end, decided below the limit. Reading stops
        at an entry whose LSO is at or past ``end_offset`` (Kafka's completeness rule:
        every transaction overlapping the range was decided by then). Raises
        TxnIndexError when a file is invalid."""
        parts = []
        for i in range(segment_index, len(p.segments)):
            seg = p.segments[i]
            if seg.txnindex_path is None:
                continue
            got = read_txn_index(logdirs.filesystem, seg.txnindex_path,
                                 segment_base_offset=seg.base_offset,
                                 next_base_offset=p.next_base_offset(i))
            if got is None or not len(got):
                continue
            keep = ((got.last_offset >= start_offset) & (got.first_offset < end_offset)
                    & (got.last_offset < decision_limit))
            parts.append(got.select(keep))
            if bool(np.any(got.last_stable_offset >= end_offset)):
                break
        return cls(AbortedTxns.concat(parts))

    def skip_positions(self, w: Window) -> np.ndarray | None:
        if not self._by_pid:
            return None
        pid, base, pos, txn, ctrl, _ = _txn_columns(w.headers)
        cand = np.flatnonzero(txn & ~ctrl)
        if not len(cand):
            return None
        skip = np.zeros(len(cand), dtype=bool)
        cpid = pid[cand]
        cbase = base[cand]
        for p_id in np.unique(cpid):
            spans = self._by_pid.get(int(p_id))
            if spans is None:
                continue
            firsts, lasts = spans
            m = cpid == p_id
            j = np.searchsorted(firsts, cbase[m], side="right") - 1
            hit = (j >= 0) & (lasts[np.maximum(j, 0)] >= cbase[m])
            skip[m] = hit
        out = pos[cand[skip]] - w.position
        return out if len(out) else None


class AbortedFromMarkers:
    """Aborted batches found from the markers in the log, reading ahead only as far as
    the transactions open at the end of each window need."""

    def __init__(self, logdirs: LogSource, p: PartitionDir, decision_limit: int, *,
                 on_corruption: str,
                 window_bytes: int, stats: ReadStats):
        self.logdirs = logdirs
        self.p = p
        self.limit = decision_limit
        # Reading ahead for markers never fails a read over damage outside its range
        # (under fail it stops there: an undecided batch stays visible); under skip and
        # stop it looks past damage, so records before a stop keep their decisions.
        self.ahead_policy = "stop" if on_corruption == "fail" else "skip"
        self.window_bytes = window_bytes
        self.stats = stats
        # producer id -> marker offsets and types seen so far (increasing offsets)
        self._markers: dict[int, list[tuple[int, int]]] = {}
        self._seen_to = -1              # markers known up to this offset (inclusive)
        self._frontier: tuple[int, int, int] | None = None  # seg, pos, prev last offset
        self._exhausted = False

    def _add_markers(self, h: np.ndarray) -> None:
        pid, base, _pos, _txn, ctrl, ctype = _txn_columns(h)
        last = _np(h, "last_offset")
        for i in np.flatnonzero(ctrl & ((ctype == CONTROL_ABORT) | (ctype == CONTROL_COMMIT))
                                & (base > self._seen_to) & (base < self.limit)):
            self._markers.setdefault(int(pid[i]), []).append((int(base[i]), int(ctype[i])))
        if len(last):
            self._seen_to = max(self._seen_to, int(last[-1]))

    def _decision(self, pid: int, offset: int) -> int | None:
        """Type of the first marker of ``pid`` after ``offset`` (None: not seen yet)."""
        marks = self._markers.get(pid)
        if not marks:
            return None
        offs = [m[0] for m in marks]
        j = int(np.searchsorted(offs, offset, side="right"))
        return marks[j][1] if j < len(marks) else None

    def _read_ahead(self, w: Window, pending: set[int]) -> None:
        """Scan headers beyond what is known until each pending producer has a marker
        after its batches, or the decision limit / log end is reached."""
        if self._exhausted:
            return
        w_last = int(w.headers["last_offset"][-1])
        if self._frontier is None or self._frontier[2] < w_last:
            # the read-ahead starts where the furthest scan so far ended
            self._frontier = (w.segment_index, w.end, w_last)
        seg_i, pos, prev_last = self._frontier
        need = {p: self._seen_to for p in pending}
        for ahead in scan_windows(self.logdirs.filesystem, self.p, segment_index=seg_i,
                                  position=pos, prev_last_offset=prev_last,
                                  on_corruption=self.ahead_policy,
                                  window_bytes=self.window_bytes,
                                  stats=self.stats, initial_window=1 << 16, quiet=True):
            self._add_markers(ahead.headers)
            self._frontier = (ahead.segment_index, ahead.end, self._seen_to)
            if all(self._decision(p, off) is not None for p, off in need.items()) \
                    or self._seen_to >= self.limit - 1:
                return
        self._exhausted = True

    def skip_positions(self, w: Window) -> np.ndarray | None:
        h = w.headers
        self._add_markers(h)
        pid, base, pos, txn, ctrl, _ = _txn_columns(h)
        cand = np.flatnonzero(txn & ~ctrl & (base < self.limit))
        if not len(cand):
            return None
        undecided = {int(pid[i]) for i in cand if self._decision(int(pid[i]), int(base[i])) is None}
        if undecided:
            self._read_ahead(w, undecided)
        skip = [int(pos[i]) - w.position for i in cand
                if self._decision(int(pid[i]), int(base[i])) == CONTROL_ABORT]
        self._prune(int(base[0]))
        return np.asarray(skip, dtype=np.int64) if skip else None

    def _prune(self, below: int) -> None:
        """Forget markers no batch at or after ``below`` can need (keep each producer's
        first marker after it)."""
        for pid, marks in list(self._markers.items()):
            k = 0
            while k < len(marks) - 1 and marks[k][0] < below:
                k += 1
            if k:
                del marks[:k]


def aborted_resolver(logdirs: LogSource, p: PartitionDir, *, segment_index: int,
                     start_offset: int, end_offset: int,
                     decision_limit: int, txn_index: str, on_corruption: str,
                     window_bytes: int, stats: ReadStats
                     ) -> AbortedFromIndex | AbortedFromMarkers:
    """The aborted-batch resolver for a read_committed read (see the module docstring)."""
    if txn_index not in TXN_INDEX_MODES:
        raise InvalidOptionError(f"txn_index must be one of {', '.join(TXN_INDEX_MODES)}, not "
                                 f"{txn_index!r}")
    has_index = any(s.txnindex_path for s in p.segments)
    if txn_index == "use" or (txn_index == "auto" and has_index):
        try:
            return AbortedFromIndex.load(logdirs, p, segment_index, start_offset, end_offset,
                                         decision_limit)
        except TxnIndexError as err:
            log.warning("%s; deriving aborted transactions from the log's markers instead",
                        err)
    return AbortedFromMarkers(logdirs, p, decision_limit, on_corruption=on_corruption,
                              window_bytes=window_bytes, stats=stats)


def _open_txns_scan(windows: Iterable[Window], open_txns: dict[int, int], start: int,
                    limit: int) -> None:
    """Apply the transactional batches in ``[start, limit)`` to ``open_txns``
    (producer id -> first offset of its open transaction)."""
    for w in windows:
        pid, base, _pos, txn, ctrl, ctype = _txn_columns(w.headers)
        sel = np.flatnonzero(txn & (base >= start) & (base < limit))
        for i in sel:
            pi = int(pid[i])
            if ctrl[i]:
                if ctype[i] in (CONTROL_ABORT, CONTROL_COMMIT):
                    open_txns.pop(pi, None)
            elif pi not in open_txns:
                open_txns[pi] = int(base[i])


def last_stable_offset(logdirs: LogSource, p: PartitionDir, *, log_start_offset: int,
                       limit: int, on_corruption: str,
                       window_bytes: int, stats: ReadStats) -> int:
    """First offset of the earliest transaction not decided below ``limit``, else
    ``limit`` (never below the log start offset)."""
    if limit <= log_start_offset or not p.segments:
        return max(limit, log_start_offset)
    open_txns: dict[int, int] = {}
    start = None
    for offset, path in reversed(p.snapshots):
        if offset > limit:
            continue
        try:
            snap = read_producer_snapshot(logdirs.filesystem, path, offset)
        except TxnIndexError as err:
            log.warning("%s; trying an older snapshot", err)
            continue
        if snap is None:
            continue
        open_txns = {pid: first for pid, first in snap.open_txn_first_offset.items()
                     if first < limit}
        start = offset
        break
    if start is None:
        start = p.segments[0].base_offset
    if start < limit:
        seg_i, pos, check = locate(logdirs, p, start)
        windows = scan_windows(logdirs.filesystem, p, segment_index=seg_i, position=pos,
                               seek_check=check, end_offset=limit,
                               on_corruption=on_corruption, window_bytes=window_bytes,
                               stats=stats, initial_window=1 << 16, quiet=True)
        _open_txns_scan(windows, open_txns, start, limit)
    lso = min([limit] + list(open_txns.values()))
    return max(lso, log_start_offset)
