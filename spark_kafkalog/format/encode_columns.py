"""Arrow columns as the encode kernel takes them: each column checked and normalised
once per call (vectorised, never per record) into runs of plain arrays with their
offset widths and units, the ``rows=`` index, and for ``offsets="preserve"`` the given
offsets and LogAppendTime flags; then the kernel's :class:`Encoder` built over them.
Private to :mod:`spark_kafkalog.format.encode`."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from spark_kafkalog.errors import BadRowError, InvalidOptionError
from spark_kafkalog.format._encode import Encoder
from spark_kafkalog.format.npview import to_numpy

_MAX_INT32 = 2 ** 31 - 1


def one_chunk(col, name: str):
    """A ChunkedArray or Array as one Array (chunks combined when there are several):
    for columns chunked unlike the others (``_runs``)."""
    if not isinstance(col, pa.ChunkedArray):
        return col
    if col.num_chunks == 1:
        return col.chunk(0)
    t = col.type
    if pa.types.is_dictionary(t):
        # chunks may carry different dictionaries: decode before combining
        col = pa.chunked_array([c.dictionary_decode() for c in col.chunks], t.value_type)
        t = col.type
    if pa.types.is_binary(t) or pa.types.is_string(t):
        # Combined, the data may outgrow int32 offsets: go large first if it could.
        total = sum(c.buffers()[2].size for c in col.chunks if c.buffers()[2] is not None)
        if total > _MAX_INT32:
            col = col.cast(pa.large_binary())
    try:
        return col.combine_chunks()
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowCapacityError) as err:
        raise InvalidOptionError(f"column {name!r} cannot be combined into one "
                                 f"array: {err}") from err


def _binary_like(arr: pa.Array, name: str, *, allow_none: bool):
    """Normalise to (binary or large_binary array, is_large) or (None, False) for a
    null-typed column. string -> binary is a zero-copy view."""
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if pa.types.is_null(t) and allow_none:
        return None, False
    if pa.types.is_binary(t):
        return arr, False
    if pa.types.is_string(t):
        return arr.view(pa.binary()), False
    if pa.types.is_large_binary(t):
        return arr, True
    if pa.types.is_large_string(t):
        return arr.view(pa.large_binary()), True
    if (pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t)
            or pa.types.is_string_view(t)):
        return arr.cast(pa.large_binary()), True
    raise InvalidOptionError(f"column {name!r} has type {t}; expected binary or string")


def _timestamps(arr: pa.Array):
    """(array, is_int32, mul, div) with ``ms = v * mul`` (div 1) or ``floor(v / div)``."""
    t = arr.type
    if pa.types.is_null(t):
        return None, False, 1, 1
    if pa.types.is_timestamp(t):
        # Arrow stores UTC epoch values whatever the time zone.
        mul, div = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1000000)}[t.unit]
        return arr, False, mul, div
    if pa.types.is_int64(t):
        return arr, False, 1, 1
    if pa.types.is_int32(t):
        return arr, True, 1, 1
    raise InvalidOptionError(f"column 'timestamp' has type {t}; expected a timestamp "
                             f"(any unit/time zone) or integer epoch milliseconds")


def _headers(arr: pa.Array):
    """(list array, is_large, key child, key_large, value child, value_large)."""
    t = arr.type
    if pa.types.is_null(t):
        return None, False, None, False, None, False
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
        raise InvalidOptionError(f"column 'headers' has type {t}; expected "
                                 f"list<struct<key: string, value: binary>>")
    st = t.value_type
    if not pa.types.is_struct(st) or st.get_field_index("key") < 0 \
            or st.get_field_index("value") < 0:
        raise InvalidOptionError(f"column 'headers' has type {t}; its elements must be "
                                 f"struct<key: string, value: binary>")
    structs = arr.values
    # flatten(): the children sliced like the struct array, a null struct making both
    # children null (a null header is then reported as a null header key).
    children = structs.flatten()
    hkey, hkey_large = _binary_like(children[st.get_field_index("key")], "headers.key",
                                    allow_none=False)
    hval, hval_large = _binary_like(children[st.get_field_index("value")],
                                    "headers.value", allow_none=True)
    if hval is None:   # all-null header values
        hval = pa.nulls(len(hkey), pa.binary())
    return arr, pa.types.is_large_list(t), hkey, hkey_large, hval, hval_large


def _column(rows, name: str):
    """The column (Array or ChunkedArray, as stored) or None when absent."""
    idx = rows.schema.get_field_index(name)
    if idx < 0:
        if name in rows.schema.names:
            raise InvalidOptionError(f"column {name!r} appears more than once")
        return None
    return rows.column(idx)


_NAMES = ("value", "key", "timestamp", "headers")


def _runs(cols: list) -> list[list]:
    """The columns (value, key, timestamp, headers; None = absent) as runs of rows:
    ``[[value, key, ts, headers] per run]`` of plain Arrays. A table built from several
    record batches keeps its chunks as runs (the kernel reads them in place, no copy)
    when every column is chunked alike; otherwise each column is combined into one."""
    present = [c for c in cols if c is not None]
    if all(isinstance(c, pa.ChunkedArray) for c in present):
        lengths = [len(ch) for ch in present[0].chunks]
        if all([len(ch) for ch in c.chunks] == lengths for c in present[1:]):
            keep = [k for k, m in enumerate(lengths) if m > 0]
            if keep:
                return [[None if c is None else c.chunk(k) for c in cols] for k in keep]
    return [[None if c is None else one_chunk(c, name) for c, name in zip(cols, _NAMES)]]


def _flag(flags: dict, name: str, value) -> None:
    """Per-column layout flags must agree across runs (they follow from the type)."""
    if flags.setdefault(name, value) != value:
        raise InvalidOptionError(f"column {name!r}: chunks normalise to different "
                                 f"layouts")


def row_index(rows, num_rows: int):
    """``rows=`` as a C-contiguous int64 numpy array, every entry in [0, num_rows)."""
    if isinstance(rows, pa.ChunkedArray):
        rows = rows.combine_chunks() if rows.num_chunks != 1 else rows.chunk(0)
    if isinstance(rows, pa.Array):
        if not (pa.types.is_int64(rows.type) or pa.types.is_int32(rows.type)):
            raise InvalidOptionError(f"rows= must be an int32 or int64 array, not "
                                     f"{rows.type}")
        if rows.null_count:
            raise InvalidOptionError(f"rows= has {rows.null_count} null entries")
        idx = to_numpy(rows)
    elif isinstance(rows, np.ndarray):
        if rows.ndim != 1 or rows.dtype.kind not in "iu":
            raise InvalidOptionError(f"rows= must be a one-dimensional integer array, not "
                                     f"{rows.ndim}-d {rows.dtype}")
        idx = rows
    else:
        raise InvalidOptionError(f"rows= must be a numpy integer array or a pyarrow "
                                 f"int32/int64 array, not {type(rows).__name__}")
    if len(idx):
        # checked in the array's own dtype (a uint64 above int64's range stays visible)
        lo = idx.min()
        hi = idx.max()
        if lo < 0 or hi >= num_rows:
            bad = int(np.flatnonzero((idx < 0) | (idx >= num_rows))[0])
            raise InvalidOptionError(f"rows=[{bad}] is {int(idx[bad])}, outside the "
                                     f"table's {num_rows} rows [0, {num_rows})")
    return np.ascontiguousarray(idx, dtype=np.int64)


OFFSET_MODES = ("assign", "preserve")


def given_offsets(table, offsets: str):
    """For ``offsets="preserve"``: ``(row_offsets, row_lat)``, the ``offset`` column as
    int64 (required, no nulls, >= 0) and, from an optional ``timestampType`` column
    (Spark's Kafka schema: 0 CreateTime, 1 LogAppendTime, -1 none; null = CreateTime),
    a uint8 array with 1 for LogAppendTime rows (None without such a column). For
    ``"assign"``: ``(None, None)``."""
    if offsets == "assign":
        return None, None
    if offsets != "preserve":
        raise InvalidOptionError(f"offsets must be one of {', '.join(OFFSET_MODES)}, "
                                 f"not {offsets!r}")
    col = _column(table, "offset")
    if col is None:
        raise InvalidOptionError("offsets='preserve' needs an 'offset' column (the offset "
                                 "each record keeps)")
    col = one_chunk(col, "offset")
    if not (pa.types.is_int64(col.type) or pa.types.is_int32(col.type)):
        raise InvalidOptionError(f"column 'offset' has type {col.type}; expected int64")
    if col.null_count:
        row = int(np.flatnonzero(~to_numpy(col.is_valid()))[0])
        raise BadRowError(f"column 'offset': null offset at row {row}")
    off = np.ascontiguousarray(to_numpy(col), dtype=np.int64)
    if len(off) and off.min() < 0:
        row = int(np.flatnonzero(off < 0)[0])
        raise BadRowError(f"column 'offset': negative offset {int(off[row])} at row {row}")
    tt = _column(table, "timestampType")
    if tt is None or pa.types.is_null(tt.type):
        return off, None
    tt = one_chunk(tt, "timestampType")
    if not pa.types.is_integer(tt.type):
        raise InvalidOptionError(f"column 'timestampType' has type {tt.type}; expected "
                                 "int (0 CreateTime, 1 LogAppendTime)")
    types = np.asarray(to_numpy(tt.fill_null(0)), dtype=np.int64)
    bad = np.flatnonzero((types < -1) | (types > 1))
    if len(bad):
        raise BadRowError(f"column 'timestampType': {int(types[bad[0]])} at row "
                          f"{int(bad[0])} is not a timestamp type (-1 none, 0 CreateTime, "
                          "1 LogAppendTime)")
    lat = np.ascontiguousarray(types == 1, dtype=np.uint8)
    return off, (lat if lat.any() else None)


def make_encoder(table, rows, now_ms: int, cls=Encoder, given=(None, None)
             ) -> tuple[Encoder, int]:
    idx = None if rows is None else row_index(rows, table.num_rows)
    enc = new_encoder(table_columns(table), idx, now_ms, cls, given)
    return enc, table.num_rows if idx is None else len(idx)


def table_columns(table) -> tuple[list, dict]:
    """``table``'s columns as the kernel takes them: runs of rows (``chunks``) and the
    offset widths and units common to all runs (``flags``). Checked here, once for any
    number of encoders over the same table."""
    if not isinstance(table, (pa.Table, pa.RecordBatch)):
        raise InvalidOptionError(f"the rows to encode must be a pyarrow Table or "
                                 f"RecordBatch, not {type(table).__name__}")
    cols = [_column(table, name) for name in _NAMES]
    if cols[0] is None:
        raise InvalidOptionError(f"rows have no 'value' column (columns: "
                                 f"{', '.join(table.schema.names) or 'none'})")
    flags: dict = {}
    chunks = []
    for value, key, ts, hd in _runs(cols):
        value, value64 = _binary_like(value, "value", allow_none=True)
        _flag(flags, "value", value64)
        key, key64 = (None, False) if key is None else _binary_like(key, "key",
                                                                    allow_none=True)
        _flag(flags, "key", key64)
        ts, ts32, mul, div = (None, False, 1, 1) if ts is None else _timestamps(ts)
        _flag(flags, "timestamp", (ts32, mul, div))
        hd, hd64, hk, hk64, hv, hv64 = (None, False, None, False, None, False) \
            if hd is None else _headers(hd)
        _flag(flags, "headers", (hd64, hk64, hv64))
        chunks.append((value, key, ts, hd, hk, hv))
    return chunks, flags


def new_encoder(columns: tuple[list, dict], idx, now_ms: int, cls=Encoder,
                 given=(None, None)) -> Encoder:
    chunks, flags = columns
    ts32, mul, div = flags["timestamp"]
    hd64, hk64, hv64 = flags["headers"]
    enc = cls(chunks, flags["value"], flags["key"], ts32, mul, div, hd64, hk64, hv64, idx,
              given[0], given[1])
    enc.prepare(now_ms)         # raises InvalidOptionError naming the first bad row
    return enc
