"""A compaction group's new segment (the cleaner's pass 3): each batch of the group's old
segments kept as it is, rebuilt without the records the cleaner removes (with a delete
horizon set on its first pass over tombstones), kept empty or dropped, as
:mod:`.cleaner` decided, then written as ``<base>.log.cleaned`` with its indexes
(:func:`~spark_kafkalog.log.write.replace.cleaned_path`), ready for the swap.
"""
from __future__ import annotations

import hashlib
import os

import numpy as np
import pyarrow.compute as pc
import pyarrow.fs as pafs

from spark_kafkalog.errors import LogLayoutError
from spark_kafkalog.format import decode_run
from spark_kafkalog.format.npview import column as _np
from spark_kafkalog.format.rebuild import empty_batch, rebase_control_batch, rebuild_batches
from spark_kafkalog.format.wire import ATTR_DELETE_HORIZON, ATTR_TIMESTAMP_TYPE
from spark_kafkalog.log.files.index import build_indexes
from spark_kafkalog.log.files.txn import encode_txn_index
from spark_kafkalog.log.io import sysio, write_fully
from spark_kafkalog.log.maintain.cleaner import RETAIN_EMPTY
from spark_kafkalog.log.write.files import write_new
from spark_kafkalog.log.write.replace import cleaned_path

__all__ = ["GroupWriter", "clean_window", "empty_of"]


class GroupWriter:
    """The new segment of one group, written as ``.cleaned`` files."""

    def __init__(self, directory: str, base: int, dry_run: bool):
        self.directory, self.base, self.dry_run = directory, base, dry_run
        self.path = cleaned_path(directory, base, ".log")
        self.fd = None if dry_run else sysio.open_fd(self.path,
                                                     os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        self.size = 0
        self.positions: list[int] = []
        self.lasts: list[int] = []
        self.max_ts: list[int] = []
        self.txn_entries: list[tuple] = []
        self.raw = 0            # batches copied unchanged
        self._digest = hashlib.sha256()

    @property
    def fingerprint(self) -> list:
        """``[size, sha256 hex]`` of the new ``.log``: how a recovery knows it is the file
        under the segment's name (:func:`~spark_kafkalog.log.write.replace.post_replace`)."""
        return [self.size, self._digest.hexdigest()]

    def add(self, data: bytes, last: int, max_ts: int) -> None:
        self._digest.update(data)
        if self.fd is not None:
            write_fully(self.fd, data, path=self.path)
        self.positions.append(self.size)
        self.lasts.append(last)
        self.max_ts.append(max_ts)
        self.size += len(data)

    def finish(self, interval: int) -> None:
        if self.fd is None:
            return
        sysio.fsync(self.fd, self.path)
        os.close(self.fd)
        self.fd = None
        index, timeindex = build_indexes(self.base, interval, self.positions, self.lasts,
                                         self.max_ts)
        write_new(pafs.LocalFileSystem(), cleaned_path(self.directory, self.base, ".index"),
                  index, fsync=True)
        write_new(pafs.LocalFileSystem(),
                  cleaned_path(self.directory, self.base, ".timeindex"), timeindex,
                  fsync=True)
        if self.txn_entries:
            write_new(pafs.LocalFileSystem(),
                      cleaned_path(self.directory, self.base, ".txnindex"),
                      encode_txn_index(self.txn_entries), fsync=True)

    def drop(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if not self.dry_run:
            for suffix in (".log", ".index", ".timeindex", ".txnindex"):
                try:
                    sysio.unlink(cleaned_path(self.directory, self.base, suffix))
                except FileNotFoundError:
                    pass


def _fields(h: dict, idx: np.ndarray, base_ts: np.ndarray) -> dict:
    return {"base_offset": h["base_offset"][idx], "last_offset": h["last_offset"][idx],
            "attributes": h["attributes"][idx], "base_timestamp": base_ts,
            "max_timestamp": h["max_timestamp"][idx], "producer_id": h["producer_id"][idx],
            "producer_epoch": h["producer_epoch"][idx],
            "base_sequence": h["base_sequence"][idx],
            "leader_epoch": h["partition_leader_epoch"][idx]}


def empty_of(h: dict, b: int) -> bytes:
    return empty_batch(base_offset=int(h["base_offset"][b]),
                       last_offset=int(h["last_offset"][b]),
                       attributes=int(h["attributes"][b]),
                       timestamp=int(h["max_timestamp"][b]),
                       producer_id=int(h["producer_id"][b]),
                       producer_epoch=int(h["producer_epoch"][b]),
                       base_sequence=int(h["base_sequence"][b]),
                       leader_epoch=int(h["partition_leader_epoch"][b]))


def clean_window(w, h: dict, b0: int, dec: dict, latest: np.ndarray, out: GroupWriter,
                 res, delete_retention_ms: int, now: int) -> None:
    """Rewrite the batches of window ``w`` (global batch numbers from ``b0``) into
    ``out``; returns nothing, counts what it removed and kept into ``res`` (the
    partition's :class:`~.compact.PartitionCompaction`)."""
    nb = len(w.headers)
    bs = np.arange(b0, b0 + nb)
    if not np.array_equal(_np(w.headers, "position"), h["position"][bs]):
        raise LogLayoutError("segment changed while it was being compacted", path=w.path,
                             position=w.position)
    rel = h["position"][bs] - w.position
    ctrl = h["is_control"][bs]
    discard = dec["discard"][bs]
    skip = rel[discard & ~ctrl]
    data_b = bs[~ctrl & ~discard]
    rows = decode_run(w.data, include_headers=True, position_base=w.position,
                      skip_positions=np.ascontiguousarray(skip, dtype=np.int64)
                      if len(skip) else None)
    offsets = rows.column("offset").to_numpy()
    # each row's batch: the decoded batches in order, by base offset
    row_b = data_b[np.searchsorted(h["base_offset"][data_b], offsets, side="right") - 1] \
        if len(data_b) else np.zeros(0, dtype=np.int64)
    keyed = pc.is_valid(rows.column("key")).to_numpy(zero_copy_only=False)
    has_value = pc.is_valid(rows.column("value")).to_numpy(zero_copy_only=False)
    horizon = dec["horizon"][row_b]
    retain_deletes = (horizon < 0) | (now < horizon)
    pos = np.searchsorted(latest, offsets)
    is_latest = (pos < len(latest)) & (latest[np.minimum(pos, len(latest) - 1)] == offsets) \
        if len(latest) else np.zeros(len(offsets), dtype=bool)
    keep = keyed & is_latest & (has_value | retain_deletes)
    res.keyless_removed += int((~keyed).sum())
    res.tombstones_removed += int((keyed & is_latest & ~has_value & ~retain_deletes).sum())
    k_of = np.bincount(row_b - b0, weights=keep, minlength=nb).astype(np.int64)
    n_of = np.bincount(row_b - b0, minlength=nb).astype(np.int64)
    tomb_of = np.bincount(row_b - b0, weights=keep & ~has_value, minlength=nb)
    new_horizon = now + delete_retention_ms
    has_h = (h["attributes"][bs] & ATTR_DELETE_HORIZON) != 0
    # batches to rebuild: some records dropped, or a first delete horizon to set
    set_h = (~ctrl) & (tomb_of > 0) & ~has_h
    rebuild = (~ctrl) & ~discard & (k_of > 0) & ((k_of < n_of) | set_h)
    built: dict[int, bytes] = {}
    rb = np.flatnonzero(rebuild)
    if len(rb):
        row_sel = np.flatnonzero(keep & np.isin(row_b - b0, rb))
        counts = k_of[rb]
        starts = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        gb = bs[rb]
        base_ts = np.where(set_h[rb], new_horizon, h["first_timestamp"][gb])
        attrs = h["attributes"][gb] | np.where(set_h[rb] | has_h[rb], ATTR_DELETE_HORIZON, 0)
        f = _fields(h, gb, base_ts)
        f["attributes"] = attrs
        deltas = offsets[row_sel] - h["base_offset"][row_b[row_sel]]
        for j, data in zip(rb, rebuild_batches(rows, row_sel, starts, deltas, f, now_ms=now)):
            built[int(j)] = data
    for j in range(nb):
        b = b0 + j
        last, mts = int(h["last_offset"][b]), int(h["max_timestamp"][b])
        raw = w.data[int(rel[j]):int(rel[j]) + int(h["size"][b])]
        if ctrl[j]:
            if discard[j]:
                res.markers_removed += 1
                if dec["retention"][b] == RETAIN_EMPTY:
                    out.add(empty_of(h, b), last, mts)
                continue
            if b in dec["index_entries"]:
                out.txn_entries.append(dec["index_entries"][b])
            if dec["empty_marker"][b] and not has_h[j]:
                out.add(rebase_control_batch(raw, new_horizon, position=int(h["position"][b])),
                        last, mts)
            else:
                out.add(bytes(raw), last, mts)
                out.raw += 1
            continue
        if discard[j]:
            res.aborted_removed += int(h["record_count"][b])
        if j in built:
            data = built[j]
            ts = mts if h["attributes"][b] & ATTR_TIMESTAMP_TYPE else int.from_bytes(
                data[35:43], "big", signed=True)
            out.add(data, last, ts)
        elif k_of[j] == n_of[j] and n_of[j] > 0 and not discard[j]:
            out.add(bytes(raw), last, mts)
            out.raw += 1
        elif dec["retention"][b] == RETAIN_EMPTY:
            out.add(empty_of(h, b), last, mts)
    res.records_after += int(keep.sum())
