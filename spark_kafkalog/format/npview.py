"""Arrow columns as numpy arrays without ``pyarrow``'s ``to_numpy``.

Why not ``Array.to_numpy()``: pyarrow (26) routes every ``to_numpy`` through its pandas
conversion layer, which imports pandas on first use. In a Spark Python worker that is
about 0.7 s of start-up and some 40,000 more objects for the garbage collector, which
Spark's worker daemon runs over the whole heap after every task. The log layer only ever
turns primitive, null-free columns (batch header fields, index columns, row numbers)
into numpy, and that is a view of the Arrow buffer: no pandas needed.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["to_numpy", "column"]


#: Arrow type -> numpy dtype or None: the log layer converts the same few types thousands
#: of times a task (a packed task's slices), and working the dtype out costs more than
#: the view itself
_DTYPES: dict = {}


def _fixed_dtype(t: pa.DataType) -> np.dtype | None:
    """The numpy dtype with the same memory layout as a fixed-width Arrow type, or None."""
    try:
        return _DTYPES[t]
    except KeyError:
        pass
    if len(_DTYPES) >= 256:         # only ever a few types; never a growing cache
        _DTYPES.clear()
    dt = _DTYPES[t] = _work_out_dtype(t)
    return dt


def _work_out_dtype(t: pa.DataType) -> np.dtype | None:
    if pa.types.is_integer(t):
        return np.dtype(f"{'i' if pa.types.is_signed_integer(t) else 'u'}{t.bit_width // 8}")
    if pa.types.is_floating(t) and t.bit_width in (32, 64):
        return np.dtype(f"f{t.bit_width // 8}")
    if pa.types.is_timestamp(t) or pa.types.is_duration(t):
        kind = "M" if pa.types.is_timestamp(t) else "m"
        return np.dtype(f"{kind}8[{t.unit}]")
    return None


def _empty_dtype(t: pa.DataType) -> np.dtype:
    if pa.types.is_boolean(t):
        return np.dtype(bool)
    return _fixed_dtype(t) or np.dtype(object)


def _array(arr: pa.Array) -> np.ndarray:
    t = arr.type
    n = len(arr)
    if arr.null_count == 0:
        dt = _fixed_dtype(t)
        if dt is not None:
            if n == 0:
                return np.empty(0, dtype=dt)
            # read-only view of the values buffer, as zero-copy to_numpy gives
            return np.frombuffer(arr.buffers()[1], dtype=dt, count=n,
                                 offset=arr.offset * dt.itemsize)
        if pa.types.is_boolean(t):
            if n == 0:
                return np.zeros(0, dtype=bool)
            off = arr.offset
            b0, b1 = off >> 3, (off + n + 7) >> 3
            bits = np.unpackbits(np.frombuffer(arr.buffers()[1], dtype=np.uint8,
                                               count=b1 - b0, offset=b0),
                                 bitorder="little")
            return bits[off - 8 * b0:off - 8 * b0 + n].astype(bool)
    # anything else (nulls, strings, nested): pyarrow's own conversion
    return arr.to_numpy(zero_copy_only=False)


def to_numpy(arr) -> np.ndarray:
    """``arr.to_numpy(zero_copy_only=False)`` for an Array or ChunkedArray, computed
    without pandas for null-free integer, float, timestamp, duration and boolean data
    (views of the buffers for the fixed-width ones: read-only)."""
    if isinstance(arr, pa.ChunkedArray):
        if arr.num_chunks == 1:
            return _array(arr.chunk(0))
        if arr.num_chunks == 0:
            return np.empty(0, dtype=_empty_dtype(arr.type))
        return np.concatenate([_array(c) for c in arr.chunks])
    if isinstance(arr, pa.Array):
        return _array(arr)
    return np.asarray(arr)


def column(table, name: str) -> np.ndarray:
    """``to_numpy`` of a table's (or record batch's) column ``name``; the field ``name``
    of a numpy structured array (the batch header rows of ``scan_header_rows``)."""
    if isinstance(table, np.ndarray):
        return table[name]
    return to_numpy(table.column(name))
