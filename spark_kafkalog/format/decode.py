"""Kafka record batches in, Arrow out: the decoding half of the format layer.

Every function takes ``data``: a contiguous bytes-like object holding batches back to
back as in a segment file -- ``bytes``, ``bytearray``, ``memoryview``, ``pyarrow.Buffer``,
``mmap.mmap`` -- any mix of magic 0, 1 and 2. Nothing returned refers to ``data``
afterwards (rows are copied into new Arrow buffers), so an mmap may be closed and a
buffer reused once a call returns.

The work happens in the compiled kernel :mod:`spark_kafkalog.format._decode`; this
module checks arguments, normalises buffers and shapes results.

Rows come out in the order of the input, one per data record, in Spark's Kafka schema
(:func:`~spark_kafkalog.format.schema.record_schema`):

* v2: ``offset = baseOffset + offsetDelta`` (gaps after compaction are kept);
  ``timestamp = baseTimestamp + timestampDelta`` with timestampType 0 (CreateTime), or
  the batch's maxTimestamp with timestampType 1 (LogAppendTime). With the
  delete-horizon attribute, baseTimestamp holds deleteHorizonMs and the same rule
  applies (it is what Kafka does). Control batches and empty batches give no rows.
  Header keys are strings; invalid UTF-8 is replaced by U+FFFD as Java decodes it.
  ``headers`` is null for a record without headers.
* magic 0: no timestamp (NO_TIMESTAMP), timestampType -1. magic 1: its timestamp and the type
  in its attributes. A compressed wrapper's value is an inner message set (one level):
  v0 inner offsets are absolute; v1 inner offsets are relative and
  ``absolute = wrapperOffset - lastInnerOffset + innerOffset`` (a wrapper offset of 0,
  written by some librdkafka producers, means the inner offsets are absolute); inner v1
  messages take the wrapper's timestamp type, and with LogAppendTime its timestamp.
* NO_TIMESTAMP (-1, and every magic 0 message) reads as -1 ms, 1969-12-31T23:59:59.999Z,
  never null: Spark's Kafka source converts the Java consumer's ``timestamp()`` (-1 for
  these) through ``java.sql.Timestamp``, so code ported from ``format("kafka")`` sees the
  same value. The timestamp column has no nulls.

Errors: :class:`CorruptRecordError` (and its subclass :class:`CodecError` for payloads
that do not decompress or exceed ``max_decompressed_bytes``),
:class:`UnsupportedFormatError` (unknown codec id, timestamps outside the range of
``timestamp[us]``), :class:`MissingCodecError`; each names the byte position of the
batch and its base offset. A run whose keys or values exceed 2 GiB (the limit of one
Arrow ``binary`` column) raises :class:`KafkaLogError`: decode smaller windows.
"""
from __future__ import annotations

import array
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from spark_kafkalog.errors import CorruptRecordError, InvalidOptionError
from spark_kafkalog.format import _decode, codecs
from spark_kafkalog.format._decode import decode_varint, decode_varlong
from spark_kafkalog.format.schema import BATCH_HEADER_SCHEMA
from spark_kafkalog.format.wire import DEFAULT_MAX_DECOMPRESSED

__all__ = [
    "BATCH_HEADER_DTYPE", "BatchHeader", "HeaderScan", "ScanProblem", "decode", "decode_run",
    "decode_segments", "decode_varint", "decode_varlong", "header_table", "read_batch_header",
    "RunScans", "scan_header_rows", "scan_headers", "scan_runs", "set_block_cache_limit",
]

# the kernel falls back on the codec registry, which uses the kernel's C decoders
_decode.set_codec_registry(codecs.decompress, codecs.zstd_decompress_fn)

_INT32_MIN, _INT32_MAX = -2 ** 31, 2 ** 31 - 1
_INT64_MIN, _INT64_MAX = -2 ** 63, 2 ** 63 - 1


def _header_dtype() -> np.dtype:
    itemsize, fields = _decode.header_row_layout()
    names = [name for name, _t, _o in fields]
    if names != BATCH_HEADER_SCHEMA.names:
        raise ImportError(f"the decode kernel's header rows {names} do not match "
                          "BATCH_HEADER_SCHEMA: rebuild the kernel")
    return np.dtype({"names": names, "formats": [t for _n, t, _o in fields],
                     "offsets": [o for _n, _t, o in fields], "itemsize": itemsize})


#: numpy structured dtype of the rows :func:`scan_header_rows` returns: the fields (and
#: order) of ``BATCH_HEADER_SCHEMA``, laid out as the kernel writes them
BATCH_HEADER_DTYPE = _header_dtype()


class BatchHeader(NamedTuple):
    """One top-level batch (v2) or legacy entry, without its records. Same fields, same
    meaning as the columns of ``BATCH_HEADER_SCHEMA`` (see :func:`scan_headers`)."""
    position: int
    size: int
    magic: int
    attributes: int
    codec: int
    base_offset: int
    last_offset: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    partition_leader_epoch: int
    is_transactional: bool
    is_control: bool
    crc: int
    control_type: int



@dataclass(frozen=True)
class ScanProblem:
    """Why a scan stopped early.

    ``kind`` is ``"torn"`` when the remaining bytes are a proper prefix of a batch
    (fewer than 17 bytes, or a plausible length running past the end of the data: the
    normal end of a log after a crash, or of a window cut mid-batch), ``"corrupt"`` when
    they cannot be a batch (unknown magic, impossible length, negative record count or
    lastOffsetDelta, CRC mismatch when checked, unreadable control record).
    ``position`` is absolute (``position_base`` added); ``offset`` is the base offset
    read from the bad batch, None when fewer than 8 bytes were left."""
    kind: str
    position: int
    offset: int | None
    reason: str


@dataclass(frozen=True)
class HeaderScan:
    """Result of :func:`scan_headers` and :func:`scan_header_rows`.

    ``headers``: one row per whole valid batch, a table of schema ``BATCH_HEADER_SCHEMA``
    (:func:`scan_headers`) or a numpy array of ``BATCH_HEADER_DTYPE``
    (:func:`scan_header_rows`).
    ``end``: absolute position just after the last of them (where the next append or the
    next scan starts). ``problem``: None when the data ended exactly at a batch end."""
    headers: pa.Table | np.ndarray
    end: int
    problem: ScanProblem | None


# ---- argument handling ----------------------------------------------------------------------

def _byte_view(data) -> memoryview:
    """A 1-D unsigned-byte view of ``data`` without copying."""
    try:
        view = memoryview(data)
    except TypeError as err:
        raise InvalidOptionError(
            "data must be a bytes-like object (bytes, bytearray, memoryview, "
            f"pyarrow.Buffer, mmap), not {type(data).__name__}") from err
    if not view.c_contiguous:
        raise InvalidOptionError("data must be a contiguous buffer")
    if view.ndim != 1 or view.format != "B":
        view = view.cast("B")
    return view


def _int_option(name: str, value, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOptionError(f"{name} must be an integer, not {value!r}")
    if not lo <= value <= hi:
        raise InvalidOptionError(f"{name} must be in [{lo}, {hi}], not {value}")
    return value


def _optional_offset(name: str, value):
    return None if value is None else _int_option(name, value, _INT64_MIN, _INT64_MAX)


def _max_decompressed(value) -> int:
    return _int_option("max_decompressed_bytes", value, 1, _INT64_MAX)


def _skip_buffer(skip_positions):
    """``skip_positions`` as a contiguous int64 buffer (sorted order is checked by the
    kernel). Accepts a pyarrow integer array, a buffer of int64 (numpy array,
    array.array("q")) or any iterable of ints."""
    if skip_positions is None:
        return None
    if isinstance(skip_positions, pa.ChunkedArray):
        skip_positions = skip_positions.combine_chunks()
    if isinstance(skip_positions, pa.Array):
        if skip_positions.null_count:
            raise InvalidOptionError("skip_positions must not contain nulls")
        arr = skip_positions.cast(pa.int64())
        if len(arr) == 0:
            return None
        words = memoryview(arr.buffers()[1]).cast("B").cast("q")
        return words[arr.offset:arr.offset + len(arr)]
    try:
        view = memoryview(skip_positions)
    except TypeError:
        view = None
    if view is not None and view.ndim == 1 and view.itemsize == 8 and view.c_contiguous \
            and view.format in ("q", "l", "<q", "<l", "=q", "=l", "@q", "@l"):
        return view.cast("B").cast("q")
    try:
        return memoryview(array.array("q", skip_positions))
    except (TypeError, OverflowError) as err:
        raise InvalidOptionError(
            f"skip_positions must be a sequence of int64 positions: {err}") from err


# ---- decoding ----------------------------------------------------------------------------------

def decode(data, *, topic: str = "", partition: int = 0, verify_crc: bool = True,
           include_headers: bool = True,
           max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED) -> pa.RecordBatch:
    """Every data record of the whole batches in ``data`` as one ``pa.RecordBatch`` of
    ``record_schema(include_headers)``; ``topic`` and ``partition`` fill the constant
    columns. Checks every CRC (CRC-32C for v2, CRC-32 for each legacy message, inner
    ones included) unless ``verify_crc`` is false. A partial batch at the end is an
    error. See the module docstring for the rules and the errors raised."""
    return decode_run(data, topic=topic, partition=partition, verify_crc=verify_crc,
                      include_headers=include_headers,
                      max_decompressed_bytes=max_decompressed_bytes)


def decode_run(data, *, topic: str = "", partition: int = 0, verify_crc: bool = True,
               include_headers: bool = True,
               max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED,
               start_offset: int | None = None, end_offset: int | None = None,
               skip_positions=None, position_base: int = 0) -> pa.RecordBatch:
    """:func:`decode` for the log layer's windows.

    Keeps only rows with ``start_offset <= offset < end_offset`` (None: unbounded). The
    kernel filters while decoding, so records outside the range are validated but never
    materialised; a v2 batch entirely outside (``lastOffset < start_offset`` or
    ``baseOffset >= end_offset``), a legacy message outside, or a compressed legacy
    wrapper whose (last) offset is below ``start_offset``, is skipped without
    decompressing it or checking its CRC.

    ``skip_positions``: sorted positions (relative to ``data``) of batches to drop whole
    -- the aborted transactional batches the log layer found in ``.txnindex``. Positions
    that are not a batch start are ignored.

    Error positions are reported as ``position_base + position in data`` (the file
    position of ``data[0]``)."""
    if not isinstance(topic, str):
        raise InvalidOptionError(f"topic must be a string, not {topic!r}")
    partition = _int_option("partition", partition, _INT32_MIN, _INT32_MAX)
    position_base = _int_option("position_base", position_base, 0, _INT64_MAX)
    return _decode.decode_buffer(
        _byte_view(data), topic, partition, bool(verify_crc), bool(include_headers),
        _max_decompressed(max_decompressed_bytes),
        _optional_offset("start_offset", start_offset),
        _optional_offset("end_offset", end_offset),
        _skip_buffer(skip_positions), position_base)


def decode_segments(segments, *, include_headers: bool = True,
                    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED
                    ) -> pa.RecordBatch | None:
    """Several whole segments decoded into one ``pa.RecordBatch`` (rows segment after
    segment), or None when one of them is not what a scan of it would pass as it stands
    (a torn or corrupt batch, offsets not increasing or outside the segment, a range not
    reached): the caller then reads them one by one, through its corruption policy.

    ``segments``: tuples ``(data, topic, partition, start_offset, end_offset, seg_base,
    seg_hi, reach)``: a segment's bytes from its position 0; the values of the topic and
    partition columns; rows ``start_offset <= offset < end_offset`` are kept; every
    batch's last offset must lie in ``[seg_base, seg_hi)``; ``reach``: an offset the
    segment's batches must get to (None: none). CRCs are checked (v2 and the outer legacy
    ones, as the log layer's scan does) before anything is decoded. Errors of records
    that do not decode are :func:`decode_run`'s, their positions in the segment."""
    return _decode.decode_segments(segments, bool(include_headers),
                                   _max_decompressed(max_decompressed_bytes))


def set_block_cache_limit(limit_bytes: int) -> int:
    """Bound the memory the decoder keeps for reuse, returning the previous bound.

    Output buffers of 1 MiB and more are mapped blocks; when every Arrow buffer over a
    block is released, the block is kept (up to ``limit_bytes`` in all, 384 MiB by
    default; the oldest are unmapped first) and the next decode call in this process
    writes into it instead of into fresh pages the kernel must zero. 0 keeps none."""
    return _decode.set_block_cache_limit(_int_option("limit_bytes", limit_bytes, 0,
                                                     _INT64_MAX))


# ---- batch headers -------------------------------------------------------------------------------

def scan_headers(data, *, position_base: int = 0, verify_crc: bool = False,
                 first_offset_hint: int | None = None) -> HeaderScan:
    """The header of every whole batch in ``data``, without decoding records.

    Never raises for bad data: it stops at the first problem and reports it in
    ``HeaderScan.problem`` (only a missing codec library, needed to read the type of a
    compressed control batch, raises). With ``verify_crc`` each batch's CRC is checked
    (for legacy entries the outer message's; inner messages are not decompressed).

    Columns (``BATCH_HEADER_SCHEMA``): ``position`` (absolute), ``size`` (whole batch,
    LOG_OVERHEAD included), ``magic``, ``attributes``, ``codec``, ``base_offset``,
    ``last_offset``, ``first_timestamp`` (the baseTimestamp field: deleteHorizonMs when
    attribute bit 6 is set), ``max_timestamp``, ``producer_id``, ``producer_epoch``,
    ``base_sequence``, ``record_count``, ``partition_leader_epoch``,
    ``is_transactional``, ``is_control``, ``crc``, ``control_type`` (the type in the key
    of a control batch's first record -- 0 ABORT, 1 COMMIT, 2 LEADER_CHANGE, ... -- else
    -1).

    Legacy entries: producer fields and leader epoch are -1. An uncompressed message has
    ``base_offset == last_offset ==`` its offset, record_count 1. A compressed wrapper has
    ``last_offset =`` its offset (that of its last inner message) and ``record_count``
    -1 (unknown without decompressing); its ``base_offset`` is taken to be the previous
    entry's last offset + 1 -- ``first_offset_hint`` for the first entry (the segment's
    base offset, say), or the wrapper's own offset without a hint. First/max timestamps
    are the v1 timestamp (-1 for v0)."""
    scan = scan_header_rows(data, position_base=position_base, verify_crc=verify_crc,
                            first_offset_hint=first_offset_hint)
    return HeaderScan(header_table(scan.headers), scan.end, scan.problem)


def scan_header_rows(data, *, position_base: int = 0, verify_crc: bool = False,
                     first_offset_hint: int | None = None) -> HeaderScan:
    """:func:`scan_headers` with the headers as a numpy structured array of
    ``BATCH_HEADER_DTYPE`` (one allocation, no Arrow): what the log layer's scans use,
    where a window holds a few batches and building Arrow arrays would cost more than
    the scan. ``headers[name]`` is a column (a strided view)."""
    position_base = _int_option("position_base", position_base, 0, _INT64_MAX)
    hint = (None if first_offset_hint is None
            else _int_option("first_offset_hint", first_offset_hint, 0, _INT64_MAX))
    buf, rows, end, problem = _decode.scan_buffer(
        _byte_view(data), 0, -1, bool(verify_crc), position_base, hint,
        DEFAULT_MAX_DECOMPRESSED)
    headers = np.frombuffer(buf, dtype=BATCH_HEADER_DTYPE, count=rows)
    if problem is not None:
        kind, pos, offset, reason = problem
        problem = ScanProblem(kind, position_base + pos, offset, reason)
    return HeaderScan(headers, position_base + end, problem)



class RunScans(NamedTuple):
    """Result of :func:`scan_runs`: ``headers`` (``BATCH_HEADER_DTYPE``) of every run, run
    after run (positions relative to each run's start); per run (int64 arrays) ``counts``
    of rows, ``ends`` (relative position after its last whole valid batch) and
    ``problems`` (1 where its scan stopped at torn or corrupt bytes)."""
    headers: np.ndarray
    counts: np.ndarray
    ends: np.ndarray
    problems: np.ndarray


def scan_runs(data, starts, lengths, first_offset_hints, *, verify_crc: bool = False
              ) -> RunScans:
    """:func:`scan_header_rows` of many independent runs of batches in one buffer in one
    call: run ``i`` is ``data[starts[i]:starts[i] + lengths[i]]``, scanned with
    ``first_offset_hint=first_offset_hints[i]`` and ``position_base=0``. For callers
    that look at thousands of small segments at once (the tails a plan needs); what
    went wrong in a run with a problem is found by scanning that run alone."""
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    hints = np.ascontiguousarray(first_offset_hints, dtype=np.int64)
    rows, counts, ends, problems = _decode.scan_buffers(
        _byte_view(data), starts, lengths, hints, bool(verify_crc), DEFAULT_MAX_DECOMPRESSED)
    return RunScans(np.frombuffer(rows, dtype=BATCH_HEADER_DTYPE),
                    np.frombuffer(counts, dtype=np.int64),
                    np.frombuffer(ends, dtype=np.int64),
                    np.frombuffer(problems, dtype=np.int64))

def header_table(rows: np.ndarray) -> pa.Table:
    """Header rows (``BATCH_HEADER_DTYPE``, as :func:`scan_header_rows` gives them) as a
    table of ``BATCH_HEADER_SCHEMA``."""
    n = len(rows)
    cols = []
    for f in BATCH_HEADER_SCHEMA:
        col = rows[f.name]
        if col.dtype == np.bool_:           # Arrow packs bools into bits
            col = np.packbits(col, bitorder="little")
        # built from buffers: pa.array of numpy data would import pandas (npview.py)
        cols.append(pa.Array.from_buffers(f.type, n,
                                          [None, pa.py_buffer(np.ascontiguousarray(col))],
                                          null_count=0))
    return pa.Table.from_arrays(cols, schema=BATCH_HEADER_SCHEMA)


def read_batch_header(data, pos: int = 0) -> BatchHeader:
    """The header of the one batch (or legacy entry) starting at ``data[pos]``; its
    ``position`` is ``pos``. Raises :class:`CorruptRecordError` when there is no whole
    valid batch there (a torn one included). The CRC is not checked."""
    view = _byte_view(data)
    pos = _int_option("pos", pos, 0, _INT64_MAX)
    if pos >= len(view):
        raise CorruptRecordError(f"no batch at position {pos}: the data holds {len(view)} "
                                 f"bytes", position=pos)
    buf, rows, _end, problem = _decode.scan_buffer(view, pos, 1, False, 0, None,
                                                   DEFAULT_MAX_DECOMPRESSED)
    if problem is not None:
        _kind, at, offset, reason = problem
        raise CorruptRecordError(reason, position=at, offset=offset)
    return BatchHeader(*np.frombuffer(buf, dtype=BATCH_HEADER_DTYPE, count=rows)[0].item())
