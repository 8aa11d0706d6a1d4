"""Record-level time ranges for inspect and the report.

A record's timestamp is what a consumer sees: in a v2 batch, the batch's base timestamp
plus the record's delta (CreateTime), or the batch's max timestamp for every record
(LogAppendTime); in a legacy v1 message set, each message's own (a LogAppendTime
wrapper's for its inner messages); v0 messages have none. A batch's base timestamp is
not a record time: after a compaction it is the delete horizon (attribute bit 6), and it
need not be the smallest. :func:`record_time_range` takes the decoded records (exact);
:func:`header_time_range` makes do with the headers: the max timestamp is exact, the
smallest is the base timestamp of CreateTime batches without a delete horizon (the
first record's, as a producer writes it), the max timestamp for the others.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from spark_kafkalog.format.npview import column as _np
from spark_kafkalog.format.wire import ATTR_DELETE_HORIZON, ATTR_TIMESTAMP_TYPE

__all__ = ["record_time_range", "header_time_range", "merge_range"]


def record_time_range(rb: pa.RecordBatch) -> tuple[int, int] | None:
    """``(min, max)`` ms of the decoded records' ``timestamp`` column (records without
    a timestamp left out); None when none has one."""
    col = rb.column(rb.schema.get_field_index("timestamp"))
    ts = np.asarray(col.cast(pa.int64()).to_numpy(zero_copy_only=False))
    ts = ts[ts >= 0] // 1000
    return (int(ts.min()), int(ts.max())) if len(ts) else None


def header_time_range(h) -> tuple[int, int] | None:
    """``(min, max)`` ms over the data batches of the header table ``h`` that hold
    records, from their headers alone (see the module doc)."""
    data = ~_np(h, "is_control") & (_np(h, "record_count") != 0)
    attrs = _np(h, "attributes")[data].astype(np.int64)
    first, last = _np(h, "first_timestamp")[data], _np(h, "max_timestamp")[data]
    exact_first = (attrs & (ATTR_TIMESTAMP_TYPE | ATTR_DELETE_HORIZON)) == 0
    lows = np.where(exact_first, first, last)
    lows, highs = lows[lows >= 0], last[last >= 0]
    if not len(highs) and not len(lows):
        return None
    stamps = np.concatenate([lows, highs])
    return int(stamps.min()), int(stamps.max())


def merge_range(a: tuple[int, int] | None, b: tuple[int, int] | None
                ) -> tuple[int, int] | None:
    if a is None or b is None:
        return a if b is None else b
    return min(a[0], b[0]), max(a[1], b[1])
