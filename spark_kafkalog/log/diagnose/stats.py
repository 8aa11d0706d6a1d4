"""Per-partition statistics for ``kafkalog report`` and ``jobs/log_report.py``: one scan
of a partition's batches (damage skipped, as inspect does), plain JSON out.

From the batch headers: batches, bytes, segments, bytes and batches by codec, bytes per
hour (a batch counts in the hour of its max timestamp), batches per producer,
transactional batches, committed and aborted transactions (their control markers).
From the decoded records (``decode=True``, the default): records, the time range (the
records' own timestamps, :mod:`.times`), records per hour (by
each record's timestamp), keyed and null-key records, distinct keys estimated with a
HyperLogLog sketch (:mod:`.distinct`) and the compaction ratio, the estimated distinct
keys over the keyed records (the share of keyed records a compaction would keep; 1.0:
nothing to compact). Without decoding, records and records per hour come from the
headers' record counts (a legacy compressed wrapper, whose header has none, counts 0)
and the time range from the headers (:func:`.times.header_time_range`).
With ``verify=True`` every finding of ``kafkalog verify`` for the
partition is included (verify reads the partition again: its own checks).
"""
from __future__ import annotations

import warnings
from typing import Callable

import numpy as np
import pyarrow as pa

from spark_kafkalog.errors import KafkaLogError
from spark_kafkalog.format import decode_run
from spark_kafkalog.format.npview import column as _np
from spark_kafkalog.format.wire import CODEC_NAMES, CONTROL_ABORT, CONTROL_COMMIT
from spark_kafkalog.log.diagnose.distinct import HyperLogLog, key_hashes
from spark_kafkalog.log.diagnose.findings import ERROR, WARNING, Finding
from spark_kafkalog.log.diagnose.times import header_time_range, merge_range, record_time_range
from spark_kafkalog.log.model import PartitionDir
from spark_kafkalog.log.read.discovery import LogDirs
from spark_kafkalog.log.read.scan import ReadStats, TornTailWarning, scan_windows
from spark_kafkalog.log.read.state import partition_state

__all__ = ["partition_stats", "HOUR_MS", "TOP_PRODUCERS"]

HOUR_MS = 3_600_000
#: producers listed by name in a partition's stats (the count covers all)
TOP_PRODUCERS = 10
#: bytes of batches decoded at a time (their records, values included, are held at once)
WINDOW_BYTES = 4 << 20


class _Acc:
    """Running totals of one partition's scan."""

    def __init__(self):
        self.batches = self.control = self.txn = self.empty = 0
        self.records = self.keyed = self.null_keys = 0
        self.valid_bytes = 0
        self.first_ts: int | None = None
        self.max_ts: int | None = None
        self.codec_bytes: dict[str, int] = {}
        self.codec_batches: dict[str, int] = {}
        self.hour_records: dict[int, int] = {}
        self.hour_bytes: dict[int, int] = {}
        self.producers: dict[int, int] = {}
        self.commits = self.aborts = 0
        self.sketch = HyperLogLog()

    @staticmethod
    def _add(target: dict, keys: np.ndarray, weights: np.ndarray | None = None) -> None:
        if not len(keys):
            return
        uniq, inverse = np.unique(keys, return_inverse=True)
        sums = np.bincount(inverse, weights=weights, minlength=len(uniq))
        for k, v in zip(uniq.tolist(), sums.tolist()):
            target[k] = target.get(k, 0) + int(v)

    def headers(self, h: np.ndarray, decode: bool) -> None:
        ctrl = _np(h, "is_control")
        data = ~ctrl
        size = _np(h, "size").astype(np.int64)
        count = _np(h, "record_count").astype(np.int64)
        self.batches += len(h)
        self.control += int(ctrl.sum())
        self.txn += int((_np(h, "is_transactional") & data).sum())
        self.empty += int(((count == 0) & data).sum())
        self.valid_bytes += int(size.sum())
        if not decode:
            self.records += int(count[data & (count > 0)].sum())
        ctype = _np(h, "control_type")
        self.aborts += int((ctrl & (ctype == CONTROL_ABORT)).sum())
        self.commits += int((ctrl & (ctype == CONTROL_COMMIT)).sum())
        codec = _np(h, "codec")[data]
        names = np.array([CODEC_NAMES.get(int(c), f"codec-{int(c)}") for c in range(8)],
                         dtype=object)
        self._add(self.codec_bytes, names[np.clip(codec, 0, 7)], size[data])
        self._add(self.codec_batches, names[np.clip(codec, 0, 7)])
        if not decode:
            self._time(header_time_range(h))
        timed = data & (_np(h, "max_timestamp") >= 0)
        hours = _np(h, "max_timestamp")[timed] // HOUR_MS * HOUR_MS
        self._add(self.hour_bytes, hours, size[timed])
        if not decode:
            self._add(self.hour_records, hours, np.clip(count[timed], 0, None))
        pid = _np(h, "producer_id")
        self._add(self.producers, pid[data & (pid >= 0)])

    def _time(self, span: tuple[int, int] | None) -> None:
        if span is not None:
            self.first_ts, self.max_ts = merge_range(
                None if self.first_ts is None else (self.first_ts, self.max_ts), span)

    def records_of(self, rb: pa.RecordBatch, keys: bool) -> None:
        self.records += rb.num_rows
        self._time(record_time_range(rb))
        ts = np.asarray(rb.column(rb.schema.get_field_index("timestamp"))
                        .cast(pa.int64()).to_numpy(zero_copy_only=False))
        ts = ts[ts >= 0] // 1000
        self._add(self.hour_records, ts // HOUR_MS * HOUR_MS)
        key = rb.column(rb.schema.get_field_index("key"))
        self.null_keys += key.null_count
        self.keyed += len(key) - key.null_count
        if keys:
            self.sketch.add_hashes(key_hashes(key))


def _finding(f: Finding, p: PartitionDir) -> dict:
    d = f.to_dict()
    d["topic"], d["partition"] = p.topic, p.partition
    return d


def partition_stats(logdirs: LogDirs, p: PartitionDir, *, decode: bool = True,
                    keys: bool = True, verify: bool = True,
                    progress: Callable[[int], None] | None = None) -> dict:
    """The statistics of partition ``p`` as a JSON-able dict (see the module docstring).
    Never raises for damaged data: what cannot be read is a problem in the result.
    ``progress(bytes_scanned)`` is called per window."""
    acc = _Acc()
    problems: list[dict] = []
    stats = ReadStats()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TornTailWarning)
        try:
            for w in scan_windows(logdirs.filesystem, p, on_corruption="skip", stats=stats,
                                  quiet=True, window_bytes=WINDOW_BYTES):
                acc.headers(w.headers, decode)
                if decode:
                    try:
                        rb = decode_run(w.data, topic=p.topic, partition=p.partition,
                                        verify_crc=False, include_headers=False,
                                        position_base=w.position)
                        acc.records_of(rb, keys)
                    except KafkaLogError as err:
                        problems.append(_finding(Finding(ERROR, "corrupt", err.path or w.path,
                                                         err.position, err.offset,
                                                         err.reason), p))
                if progress is not None:
                    progress(stats.bytes_read)
        except KafkaLogError as err:
            problems.append(_finding(Finding(ERROR, "layout", err.path or p.path,
                                             err.position, err.offset, err.reason), p))
    state = None
    try:
        state = partition_state(logdirs, p, on_corruption="skip", timestamps=False)
    except KafkaLogError as err:
        problems.append(_finding(Finding(ERROR, "layout", err.path or p.path, err.position,
                                         err.offset, err.reason), p))
    if verify:
        from spark_kafkalog.log.diagnose.verify import verify_partition

        _, findings = verify_partition(logdirs, p)
        problems.extend(_finding(f, p) for f in findings)
    distinct = acc.sketch.estimate() if decode and keys else None
    if distinct is not None:
        distinct = min(distinct, acc.keyed)
    top = sorted(acc.producers.items(), key=lambda kv: (-kv[1], kv[0]))
    hours = sorted(set(acc.hour_records) | set(acc.hour_bytes))
    return {
        "topic": p.topic, "partition": p.partition, "root": p.root, "path": p.path,
        "segments": len(p.segments), "size_bytes": p.size_bytes,
        "valid_bytes": acc.valid_bytes, "batches": acc.batches,
        "control_batches": acc.control, "transactional_batches": acc.txn,
        "empty_batches": acc.empty, "records": acc.records,
        "keyed_records": acc.keyed if decode else None,
        "null_key_records": acc.null_keys if decode else None,
        "first_timestamp": acc.first_ts, "max_timestamp": acc.max_ts,
        "log_start_offset": state.log_start_offset if state else None,
        "log_end_offset": state.log_end_offset if state else None,
        "high_watermark": state.high_watermark if state else None,
        "codec_bytes": dict(sorted(acc.codec_bytes.items())),
        "codec_batches": dict(sorted(acc.codec_batches.items())),
        "hours": [[hr, acc.hour_records.get(hr, 0), acc.hour_bytes.get(hr, 0)]
                  for hr in hours],
        "producers": len(acc.producers),
        "top_producers": [[pid, n] for pid, n in top[:TOP_PRODUCERS]],
        "committed_transactions": acc.commits, "aborted_transactions": acc.aborts,
        "distinct_keys": distinct,
        "compaction_ratio": (round(min(1.0, distinct / acc.keyed), 4)
                             if distinct is not None and acc.keyed else None),
        "hll": acc.sketch.to_text() if decode and keys else None,
        "problems": problems,
        "errors": sum(1 for f in problems if f["severity"] == ERROR),
        "warnings": sum(1 for f in problems if f["severity"] == WARNING),
    }
