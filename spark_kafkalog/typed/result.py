"""What every typed-value decoder returns, and the per-row error column they share.

:class:`DecodeResult` has the shape of the Avro decoder's result (``array``, ``errors``,
``kept``), so the read options dispatch on a schema type without caring which decoder ran.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from spark_kafkalog.errors import InvalidOptionError

FRAMINGS = ("confluent", "none")
ON_ERROR = ("fail", "null", "skip")


@dataclass
class DecodeResult:
    """What a decoder's ``decode`` returns.

    array   the decoded column (the decoder's ``arrow_type``); null where the input is
            null, and under ``on_error="null"`` where the record is bad; under ``"skip"``
            the bad rows are left out
    errors  under ``"null"``/``"skip"``: per input row, the error text (null where fine)
    kept    under ``"skip"``: per input row, whether it is in ``array``
    schema_ids, positions
            under ``"null"``/``"skip"``: per input row, the schema id read from the
            framing and the byte of the value where decoding failed (null where the row
            is fine, the value has no id, or the decoder knows no position): what a
            dead-letter record keeps beside the error text
    """

    array: pa.Array
    errors: pa.StringArray | None = None
    kept: pa.BooleanArray | None = None
    schema_ids: pa.Int64Array | None = None
    positions: pa.Int64Array | None = None

    def set_errors(self, n: int, bad: list[tuple[int, str, int | None, int | None]]) -> None:
        """``errors``, ``schema_ids`` and ``positions`` of ``n`` rows from ``bad``:
        ``(row, text, schema id or None, byte position or None)``, rows ascending."""
        self.errors = error_column(n, [(r, t) for r, t, _, _ in bad])
        # int64: the frame's four id bytes as read (unsigned), the number the error
        # text names; a hostile frame's id does not fit Java's signed int
        self.schema_ids = _sparse(n, [(r, s) for r, _, s, _ in bad], pa.int64())
        self.positions = _sparse(n, [(r, p) for r, _, _, p in bad], pa.int64())


def check_modes(framing: str, on_error: str) -> int:
    """Validate ``framing`` and ``on_error``; the index of ``on_error`` in :data:`ON_ERROR`."""
    if framing not in FRAMINGS:
        raise InvalidOptionError(f"framing must be one of {FRAMINGS}, not {framing!r}")
    if on_error not in ON_ERROR:
        raise InvalidOptionError(f"on_error must be one of {ON_ERROR}, not {on_error!r}")
    return ON_ERROR.index(on_error)


def binary_values(values, what: str) -> pa.Array:
    """``values`` as one binary / large_binary array (a ChunkedArray is combined)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not isinstance(values, pa.Array) or not (
            pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type)):
        raise InvalidOptionError(f"{what} values must be a binary array, not "
                                 f"{getattr(values, 'type', type(values).__name__)}")
    return values


def error_column(n: int, bad: list[tuple[int, str]]) -> pa.StringArray:
    """A string column of ``n`` rows: the text of each ``(row, text)`` in ``bad`` (rows
    ascending), null elsewhere. Built from buffers: one Python string per bad row only."""
    if not bad:
        return pa.nulls(n, pa.string())
    rows = np.fromiter((r for r, _ in bad), dtype=np.int64, count=len(bad))
    encoded = [t.encode("utf-8") for _, t in bad]
    lengths = np.zeros(n, dtype=np.int32)
    lengths[rows] = [len(t) for t in encoded]
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    valid = np.zeros(n, dtype=bool)
    valid[rows] = True
    return pa.Array.from_buffers(
        pa.string(), n,
        [pa.py_buffer(np.packbits(valid, bitorder="little")), pa.py_buffer(offsets),
         pa.py_buffer(b"".join(encoded))],
        null_count=n - len(bad))


def _sparse(n: int, items: list[tuple[int, int | None]], type_: pa.DataType) -> pa.Array:
    """An integer column of ``n`` rows: each ``(row, value)`` of ``items`` (value None:
    stays null), null elsewhere. One Python int per bad row only."""
    items = [(r, v) for r, v in items if v is not None]
    if not items:
        return pa.nulls(n, type_)
    values = np.zeros(n, dtype=type_.to_pandas_dtype())
    valid = np.zeros(n, dtype=bool)
    rows = np.fromiter((r for r, _ in items), dtype=np.int64, count=len(items))
    values[rows] = [v for _, v in items]
    valid[rows] = True
    return pa.array(values, type=type_, mask=~valid)
