"""Arrow rows -> Kafka v2 record batches, as a non-idempotent Java producer writes them.

``encode`` (the contract is its docstring), ``encode_batches`` (the same bytes plus a
per-batch index for .index/.timeindex maintenance) and ``encode_partitioned`` (every row
into its partition's batches) have the Arrow columns checked and normalised
(:mod:`.encode_columns`) and hand raw buffers to the compiled kernel
:mod:`spark_kafkalog.format._encode`. The output reuse behind
``set_output_reuse_limit`` and why it exists: docs/PERFORMANCE.md.
"""
from __future__ import annotations

import os
import threading
import time

import numpy as np
import pyarrow as pa

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.format import codecs
from spark_kafkalog.format._encode import (
    PartitionedEncoder,
    encode_varint,
    join_output,
    encode_varlong,
    output_reuse_kept,
    set_output_reuse_limit,
    varint_size,
    varlong_size,
)
from spark_kafkalog.format.encode_columns import (
    given_offsets,
    make_encoder,
    new_encoder,
    row_index,
    table_columns,
)
from spark_kafkalog.format.npview import to_numpy
from spark_kafkalog.format.wire import CODEC_NONE, V2_HEADER_SIZE

__all__ = ["BATCH_INDEX_SCHEMA", "encode", "encode_batches", "encode_partitioned",
           "encode_varint",
           "encode_varlong", "output_reuse_kept", "set_output_reuse_limit", "varint_size",
           "varlong_size"]

_MAX_INT32 = 2 ** 31 - 1
_MAX_INT64 = 2 ** 63 - 1
#: below this much (uncompressed) record data, one thread does all the work
_PARALLEL_MIN_BYTES = 4 << 20
_MAX_AUTO_THREADS = 4

#: one row per written batch (``encode_batches``)
BATCH_INDEX_SCHEMA = pa.schema([
    pa.field("position", pa.int64()),                 # byte position of the batch start
    pa.field("size", pa.int32()),                     # whole batch incl. 12-byte prefix
    pa.field("base_offset", pa.int64()),
    pa.field("last_offset", pa.int64()),
    pa.field("first_timestamp", pa.int64()),          # baseTimestamp, epoch ms
    pa.field("max_timestamp", pa.int64()),
    pa.field("offset_of_max_timestamp", pa.int64()),  # first record with max_timestamp
    pa.field("record_count", pa.int32()),
])


def _crc32c_fn():
    try:
        from crc32c import crc32c
    except ImportError as err:      # a declared dependency; say what to install anyway
        from spark_kafkalog.errors import MissingCodecError
        raise MissingCodecError("writing record batches needs CRC-32C: "
                                "pip install crc32c") from err
    return crc32c


def _check_int(name: str, v, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise InvalidOptionError(f"{name} must be an int in [{lo}, {hi}], got {v!r}")
    return v


_NOT_PARTITIONED = object()


def _check_options(table, compression, offsets: str, base_offset, max_batch_bytes,
                   partition_leader_epoch, now_ms, num_partitions=_NOT_PARTITIONED
                   ) -> tuple:
    """The options :func:`encode_batches` and :func:`encode_partitioned` share (and
    ``num_partitions``, given), checked in one order: ``(codec id,
    given_offsets(table, offsets), now_ms)`` (now_ms None: the time now)."""
    cid = codecs.codec_id(compression)
    given = given_offsets(table, offsets)
    if given[0] is not None and base_offset != 0:
        raise InvalidOptionError("base_offset cannot be combined with offsets='preserve'")
    if num_partitions is not _NOT_PARTITIONED:
        _check_int("num_partitions", num_partitions, 1, _MAX_INT32)
    _check_int("base_offset", base_offset, 0, _MAX_INT64)
    _check_int("max_batch_bytes", max_batch_bytes, V2_HEADER_SIZE + 1, _MAX_INT32)
    _check_int("partition_leader_epoch", partition_leader_epoch, -1, _MAX_INT32)
    if now_ms is None:
        now_ms = int(time.time() * 1000)
    _check_int("now_ms", now_ms, 0, _MAX_INT64)
    return cid, given, now_ms


def _check_level(cid: int, compression_level) -> None:
    """A compression level only with a codec, and one the codec accepts."""
    if cid != CODEC_NONE:
        codecs.compress(cid, b"", level=compression_level)   # validates the level early
    elif compression_level is not None:
        raise InvalidOptionError("compression_level given with compression 'none'")


def _auto_threads() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, _MAX_AUTO_THREADS))


def _range_bounds(nbatches: int, threads: int) -> list[int]:
    """Split [0, nbatches) into at most ``threads`` contiguous, non-empty ranges."""
    threads = max(1, min(threads, nbatches))
    return [nbatches * i // threads for i in range(threads + 1)]


def _run_ranges(work, nbatches: int, threads: int) -> None:
    """Call ``work(b0, b1)`` over [0, nbatches) split into ``threads`` contiguous ranges,
    one thread each (the calling thread takes the first). The kernels and codec
    libraries release the GIL, so ranges run in parallel. The first error is re-raised."""
    bounds = _range_bounds(nbatches, threads)
    if len(bounds) <= 2:
        work(0, nbatches)
        return
    threads = len(bounds) - 1
    errors: list[BaseException] = []

    def run(b0: int, b1: int) -> None:
        try:
            work(b0, b1)
        except BaseException as err:     # handed to the calling thread, re-raised there
            errors.append(err)

    workers = [threading.Thread(target=run, args=(bounds[i], bounds[i + 1]),
                                name=f"kafkalog-encode-{i}", daemon=True)
               for i in range(1, threads)]
    for w in workers:
        w.start()
    run(bounds[0], bounds[1])
    for w in workers:
        w.join()
    if errors:
        raise errors[0]


def encode_batches(table, /, *, rows=None, compression="none", base_offset: int = 0,
                   max_batch_bytes: int = 1048576, compression_level: int | None = None,
                   partition_leader_epoch: int = -1, now_ms: int | None = None,
                   threads: int | None = None, offsets: str = "assign"):
    """Like :func:`encode`, also returning the per-batch index table (see module doc)."""
    cid, given, now_ms = _check_options(table, compression, offsets, base_offset,
                                        max_batch_bytes, partition_leader_epoch, now_ms)
    if threads is not None:
        _check_int("threads", threads, 1, 1024)
    _check_level(cid, compression_level)
    crc32c = _crc32c_fn()

    enc, n = make_encoder(table, rows, now_ms, given=given)
    if n == 0:
        return b"", _index_table([])
    # each record's offset relative to base_offset, in output order (None: its position)
    ords = None if given[0] is None else (given[0] if rows is None
                                          else given[0][row_index(rows, table.num_rows)])
    if base_offset + n - 1 > _MAX_INT64:
        raise InvalidOptionError(f"base_offset {base_offset} + {n} rows overflows int64")
    nbatches = enc.plan(max_batch_bytes)
    if threads is None:
        total = enc.total_records_bytes
        threads = _auto_threads() if total >= _PARALLEL_MIN_BYTES else 1

    if cid == CODEC_NONE:
        data = enc.layout_uncompressed()
        # With several threads, let the CRC calls drop the GIL (gil_release_mode=1).
        crc = crc32c if threads <= 1 else (lambda buf: crc32c(buf, 0, 1))
        _run_ranges(lambda b0, b1: enc.fill_uncompressed(b0, b1, base_offset,
                                                         partition_leader_epoch, crc),
                    nbatches, threads)
        return data, _index_from_columns(enc.uncompressed_index(base_offset), nbatches)

    attributes = cid                                   # CreateTime, not transactional
    bounds = _range_bounds(nbatches, threads)
    results: dict[int, tuple] = {}     # range start -> (that range's bytes, its batches)

    def work(b0: int, b1: int) -> None:
        # one compressor per thread: a zstd context must not be shared
        results[b0] = enc.compress_range(b0, b1, codecs.compressor(cid, compression_level),
                                         crc32c, max_batch_bytes, base_offset,
                                         partition_leader_epoch, attributes)

    _run_ranges(work, nbatches, threads)
    pieces = []
    index = []
    pos = 0
    for b0 in bounds[:-1]:
        data, batches = results.pop(b0)
        for at, size, start, end, base_ts, max_ts, max_row in batches:
            if ords is not None:
                first, last, max_off = (int(ords[start]), int(ords[end - 1]),
                                        int(ords[max_row]))
            else:
                first, last, max_off = start, end - 1, max_row
            index.append((pos + at, size, base_offset + first, base_offset + last,
                          base_ts, max_ts, base_offset + max_off, end - start))
        pieces.append(data)
        pos += len(data)
    data = pieces[0] if len(pieces) == 1 else join_output(pieces, pos)
    return data, _index_table(index)


def _index_from_columns(cols: list[bytes], nbatches: int) -> pa.Table:
    arrays = []
    for buf, field in zip(cols, BATCH_INDEX_SCHEMA):
        physical = pa.int32() if field.name == "record_count" else pa.int64()
        arr = pa.Array.from_buffers(physical, nbatches, [None, pa.py_buffer(buf)])
        arrays.append(arr if arr.type == field.type else arr.cast(field.type))
    return pa.table(arrays, schema=BATCH_INDEX_SCHEMA)


def _index_table(index: list[tuple]) -> pa.Table:
    cols = list(zip(*index)) if index else [[] for _ in BATCH_INDEX_SCHEMA]
    return pa.table([pa.array(c, f.type) for c, f in zip(cols, BATCH_INDEX_SCHEMA)],
                    schema=BATCH_INDEX_SCHEMA)


def encode_partitioned(table, parts, num_partitions: int, /, *, compression="none",
                       base_offset: int = 0, max_batch_bytes: int = 1048576,
                       compression_level: int | None = None,
                       partition_leader_epoch: int = -1, now_ms: int | None = None,
                       offsets: str = "assign"):
    """Encode every row of ``table`` into the batches of its partition.

    ``parts``: the partition of each row (integers in ``[0, num_partitions)``, one per
    row). Returns ``(data, sections)``: ``sections`` lists ``(partition, start, end,
    index)`` for each partition that has rows, in partition order, where
    ``data[start:end]`` is exactly what ``encode_batches(table, rows=<that partition's
    rows, in row order>, ...)`` returns for it, and ``index`` its batch index (positions
    relative to ``start``); every partition's offsets start at ``base_offset``.

    Uncompressed: one pass over the rows in order (see ``_encode.PartitionedEncoder``),
    where encoding each partition through ``rows=`` reads the columns once per
    partition. Compressed: one encoder per partition over its rows, on columns checked
    once for all of them, with one index table for all (with many partitions, per-call
    work cost more than the compression).

    ``offsets="preserve"``: as for :func:`encode`; offsets must increase strictly within
    each partition (rows of one partition in offset order)."""
    cid, given, now_ms = _check_options(table, compression, offsets, base_offset,
                                        max_batch_bytes, partition_leader_epoch, now_ms,
                                        num_partitions)
    if isinstance(parts, (pa.Array, pa.ChunkedArray)):
        if parts.null_count:
            raise InvalidOptionError(f"parts has {parts.null_count} null entries")
        parts = to_numpy(parts.combine_chunks() if isinstance(parts, pa.ChunkedArray)
                         else parts)
    parts = np.asarray(parts)
    if parts.ndim != 1 or parts.dtype.kind not in "iu":
        raise InvalidOptionError(f"parts must be a one-dimensional integer array, not "
                                 f"{parts.ndim}-d {parts.dtype}")
    if len(parts) != table.num_rows:
        raise InvalidOptionError(f"parts has {len(parts)} entries for {table.num_rows} "
                                 f"rows")
    if len(parts) and (parts.min() < 0 or parts.max() >= num_partitions):
        bad = int(np.flatnonzero((parts < 0) | (parts >= num_partitions))[0])
        raise InvalidOptionError(f"parts[{bad}] is {int(parts[bad])}, outside "
                                 f"[0, {num_partitions})")
    parts = np.ascontiguousarray(parts, dtype=np.int32)
    _check_level(cid, compression_level)
    if cid != CODEC_NONE:
        return _encode_partitioned_compressed(table, parts, num_partitions, cid,
                                              compression_level, base_offset,
                                              max_batch_bytes, partition_leader_epoch,
                                              now_ms, given)
    enc, n = make_encoder(table, None, now_ms, PartitionedEncoder, given)
    if n == 0:
        return b"", []
    if base_offset + n - 1 > _MAX_INT64:
        raise InvalidOptionError(f"base_offset {base_offset} + {n} rows overflows int64")
    enc.set_partitions(parts, num_partitions)
    enc.plan_partitioned(max_batch_bytes)
    data = enc.layout_partitioned()
    enc.fill_partitioned(base_offset, partition_leader_epoch, _crc32c_fn())
    # one index table for every batch, sliced per partition (a table per partition
    # costs more than the encoding when there are thousands of partitions)
    bounds, cols = enc.index(base_offset)
    index = _index_from_columns(cols, len(cols[7]) // 4)
    return data, [(p, start, end, index.slice(b0, b1 - b0))
                  for p, b0, b1, start, end in bounds]


def _encode_partitioned_compressed(table, parts: np.ndarray, num_partitions: int, cid: int,
                                   level, base_offset: int, max_batch_bytes: int,
                                   leader_epoch: int, now_ms: int, given=(None, None)):
    from spark_kafkalog.format._partition import group_by_partition
    columns = table_columns(table)
    if table.num_rows == 0:
        return b"", []
    if base_offset + table.num_rows - 1 > _MAX_INT64:
        raise InvalidOptionError(f"base_offset {base_offset} + {table.num_rows} rows "
                                 f"overflows int64")
    order, counts = group_by_partition(parts, num_partitions)
    compress_fn = codecs.compressor(cid, level)
    crc32c = _crc32c_fn()
    pieces, index, bounds = [], [], []
    pos = start = 0
    for p in np.flatnonzero(counts).tolist():
        c = int(counts[p])
        rows = order[start:start + c]
        enc = new_encoder(columns, rows, now_ms, given=given)
        start += c
        ords = None if given[0] is None else given[0][rows]
        data, batches = enc.compress_range(0, enc.plan(max_batch_bytes), compress_fn,
                                           crc32c, max_batch_bytes, base_offset,
                                           leader_epoch, cid)
        b0 = len(index)
        for at, size, first, end, base_ts, max_ts, max_row in batches:
            lo, hi, at_max = ((first, end - 1, max_row) if ords is None else
                              (int(ords[first]), int(ords[end - 1]), int(ords[max_row])))
            index.append((at, size, base_offset + lo, base_offset + hi,
                          base_ts, max_ts, base_offset + at_max, end - first))
        bounds.append((p, b0, len(index), pos, pos + len(data)))
        pieces.append(data)
        pos += len(data)
    data = pieces[0] if len(pieces) == 1 else join_output(pieces, pos)
    table_index = _index_table(index)
    return data, [(p, a, b, table_index.slice(b0, b1 - b0))
                  for p, b0, b1, a, b in bounds]


def encode(table, /, *, rows=None, compression="none", base_offset: int = 0,
           max_batch_bytes: int = 1048576, compression_level: int | None = None,
           partition_leader_epoch: int = -1, now_ms: int | None = None,
           threads: int | None = None, offsets: str = "assign") -> bytes:
    """Encode Arrow rows (all of ``table``'s, or those ``rows`` lists) as v2 record
    batches.

    ``table`` (positional) is a ``pyarrow.Table`` or ``pyarrow.RecordBatch`` with

    ``value``      binary / string / large_binary / large_string (binary_view,
                   string_view, fixed_size_binary and dictionary-encoded are accepted
                   too); required. Null stays null (length -1), empty stays empty.
    ``key``        same types; optional (absent = null keys).
    ``timestamp``  timestamp of any unit and time zone (stored as UTC epoch
                   milliseconds, rounded down), or an integer column of epoch
                   milliseconds; optional. Null or absent: the time of the call (one
                   ``now`` for the whole call, or ``now_ms``). -1 ms is kept as Kafka's
                   NO_TIMESTAMP (what a read returns for a record without one); other
                   negative (pre-1970) timestamps are rejected, as the Java producer
                   rejects them.
    ``headers``    list<struct<key: string, value: binary>> (list / large_list; string
                   or binary fields, any size); optional. A null list means no
                   headers; header keys must not be null, header values may be.

    Other columns (``topic``, ``partition``, ``offset``, ...) are ignored, so a decoded
    table can be written back as is -- unless ``offsets="preserve"``: then each record
    keeps the offset in column ``offset`` (int64, no nulls, >= 0, strictly increasing in
    the order written; gaps allowed, as compaction leaves them): a batch's baseOffset is
    its first record's offset, its records carry their offset deltas and its
    lastOffsetDelta is its last record's. A batch is cut where a delta would overflow
    an int32. With a ``timestampType`` column (0 CreateTime, 1 LogAppendTime, -1 or
    null: CreateTime), LogAppendTime rows go into batches of their own, one timestamp
    per batch, written as a broker writes them: attribute bit 3 set, baseTimestamp and
    maxTimestamp that timestamp, timestamp deltas 0. ``base_offset`` must stay 0.
    Non-increasing offsets raise :class:`BadRowError` naming both rows.

    ``rows``: None (every row, in order) or a one-dimensional integer array of row
    numbers into ``table`` -- a numpy integer array, or a pyarrow int32/int64 Array or
    ChunkedArray without nulls. The records written are then exactly those of
    ``table.take(rows)``, in that order (offsets ``base_offset, base_offset + 1, ...``
    follow the index, repeated rows are written repeatedly), byte for byte, but the
    kernel reads the columns through the index instead of materialising the taken
    table. Errors name the row of ``table``. An index outside ``[0, num_rows)`` (no
    negative wrap-around) raises :class:`InvalidOptionError` before any other work.

    A table whose columns are chunked alike (one built from many record batches) is
    read chunk by chunk in place, with or without ``rows``; columns chunked unlike
    each other are combined into one array each first (a copy).

    Returns v2 record batches back to back: magic 2, CreateTime, no producer id
    (producerId -1, producerEpoch -1, baseSequence -1, not transactional), the given
    ``partition_leader_epoch`` (the Java producer writes -1; a broker stamps its epoch
    on append -- the field is outside the CRC, like baseOffset), offsets
    ``base_offset, base_offset + 1, ...`` in row order, baseTimestamp the batch's
    first record's timestamp, maxTimestamp the largest, CRC-32C over [attributes, end).

    Batch size: records go into a batch while its *uncompressed* size (61-byte header
    plus records) stays within ``max_batch_bytes``; a record that alone is larger gets
    a batch of its own. With compression the written batch is therefore smaller than
    the bound, and is guaranteed not to exceed it (a batch whose compressed form would
    -- incompressible data plus codec framing -- is split in two and retried). This is
    stricter than the Java producer's ``batch.size``, which fills a batch up to an
    *estimated compressed* size; it keeps every batch within a broker's
    ``max.message.bytes`` when that is set to ``max_batch_bytes``.

    Raises :class:`InvalidOptionError` (naming the column, and the row for bad values)
    for a missing ``value`` column, unsupported column types, bad options, negative
    timestamps, null header keys and records that no batch can hold (>= 2 GiB).

    ``threads``: batches are written (and compressed) by this many threads, each on a
    contiguous range of batches; the output does not depend on it. ``None`` picks the
    number of usable cores (at most 4) once there are 4 MiB of records, else 1. The
    kernel and the codec libraries release the GIL, so threads run in parallel; pass
    ``threads=1`` where the caller already runs one task per core (Spark executors).

    Memory: the last output of 1 MiB or more (up to ``set_output_reuse_limit(nbytes)``,
    default 256 MiB; 0 turns it off) stays referenced by the module, and once the
    caller has dropped it the next encode writes into it again. An output anything
    else still references is never touched; ``output_reuse_kept()`` says how many
    bytes are held."""
    data, _ = encode_batches(table, rows=rows, compression=compression,
                             base_offset=base_offset,
                             max_batch_bytes=max_batch_bytes,
                             compression_level=compression_level,
                             partition_leader_epoch=partition_leader_epoch, now_ms=now_ms,
                             threads=threads, offsets=offsets)
    return data
