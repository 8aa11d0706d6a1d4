"""Bytes in, Arrow columns out — and back. No file I/O, no Spark.

Public API (the log layer and tests use only these names):

``decode(data, *, topic="", partition=0, verify_crc=True, include_headers=True,
max_decompressed_bytes=DEFAULT_MAX_DECOMPRESSED) -> pyarrow.RecordBatch``
    ``data`` holds whole record batches back to back (any mix of magic 0, 1, 2, as in a
    segment file). One row per data record, schema :func:`record_schema`. Control
    records are never rows. Raises :class:`CorruptRecordError` (naming byte position
    and base offset) on any bad input, including a partial batch at the end.

``decode_run(data, *, ..., start_offset=None, end_offset=None, skip_positions=None,
position_base=0)``
    ``decode`` plus what the log layer needs: keep only rows with
    ``start_offset <= offset < end_offset``; drop whole batches whose start position
    (relative to ``data``) is in the sorted int64 sequence ``skip_positions`` (aborted
    transactions); error positions are reported as ``position_base + pos``.

``scan_headers(data, *, position_base=0, verify_crc=False, first_offset_hint=None)
-> HeaderScan``
    Batch headers without decoding records. Never raises for bad data: it stops at the
    first problem and reports it (``HeaderScan.problem``), so the log layer can apply
    its corruption policy.

``read_batch_header(data, pos=0) -> BatchHeader``  one header (raises on bad data).

``encode(table, /, *, rows=None, compression="none", base_offset=0,
max_batch_bytes=1048576, compression_level=None) -> bytes``
    v2 record batches (CreateTime, producer id -1) from an Arrow table/batch with
    ``value`` and optional ``key``, ``timestamp``, ``headers`` columns; ``rows`` (row
    numbers) encodes exactly ``table.take(rows)`` without materialising it.
    ``encode_batches`` returns the same bytes plus a per-batch index (position, size,
    offsets, timestamps, record count) for the appender's .index/.timeindex.

``encode_partitioned(table, parts, num_partitions, /, *, compression="none",
base_offset=0, max_batch_bytes=1048576, compression_level=None) -> (data, sections)``
    Every row into its partition's batches (uncompressed: in one pass over the rows);
    each section ``(partition, start, end, index)`` holds exactly what ``encode_batches``
    gives for that partition's rows on their own.

``compress`` / ``decompress``: the codec registry (see :mod:`.codecs`).
"""
from spark_kafkalog.errors import (
    CodecError,
    CorruptRecordError,
    KafkaLogError,
    MissingCodecError,
    UnsupportedFormatError,
)
from spark_kafkalog.format.codecs import compress, decompress
from spark_kafkalog.format.decode import (
    BatchHeader,
    HeaderScan,
    ScanProblem,
    decode,
    decode_run,
    read_batch_header,
    scan_headers,
)
from spark_kafkalog.format.encode import encode, encode_batches, encode_partitioned
from spark_kafkalog.format.schema import (
    BATCH_HEADER_SCHEMA,
    SCHEMA,
    SCHEMA_WITH_HEADERS,
    record_schema,
)
from spark_kafkalog.format.wire import DEFAULT_MAX_DECOMPRESSED

__all__ = [
    "BATCH_HEADER_SCHEMA", "BatchHeader", "CodecError", "CorruptRecordError",
    "DEFAULT_MAX_DECOMPRESSED", "HeaderScan", "KafkaLogError", "MissingCodecError",
    "SCHEMA", "SCHEMA_WITH_HEADERS", "ScanProblem", "UnsupportedFormatError", "compress",
    "decode", "decode_run", "decompress", "encode", "encode_batches", "encode_partitioned", "read_batch_header", "record_schema",
    "scan_headers",
]
