"""Bytes in, Arrow columns out -- and back. No file I/O, no Spark.

The public API (the log layer and the tests use only these names): ``decode``,
``decode_run``, ``scan_headers`` (``scan_header_rows``: the same as numpy rows; ``scan_runs``: of many
runs at once),
``read_batch_header`` (:mod:`.decode`); ``encode``,
``encode_batches``, ``encode_partitioned`` (:mod:`.encode`); ``compress``,
``decompress`` (the codec registry, :mod:`.codecs`); ``murmur2``, ``partition_for_keys``
(the Java producer's default partitioner, :mod:`._partition`). Byte layouts: :mod:`.wire`.
The records of ``__consumer_offsets`` and ``__transaction_state``: :mod:`.coordinator`.
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
    BATCH_HEADER_DTYPE,
    BatchHeader,
    HeaderScan,
    ScanProblem,
    decode,
    decode_run,
    decode_segments,
    header_table,
    read_batch_header,
    scan_header_rows,
    scan_headers,
    scan_runs,
)
from spark_kafkalog.format.encode import encode, encode_batches, encode_partitioned
from spark_kafkalog.format._partition import murmur2, partition_for_keys
from spark_kafkalog.format.schema import (
    BATCH_HEADER_SCHEMA,
    SCHEMA,
    SCHEMA_WITH_HEADERS,
    record_schema,
)
from spark_kafkalog.format.wire import DEFAULT_MAX_DECOMPRESSED

__all__ = [
    "BATCH_HEADER_DTYPE", "BATCH_HEADER_SCHEMA", "BatchHeader", "CodecError", "CorruptRecordError",
    "DEFAULT_MAX_DECOMPRESSED", "HeaderScan", "KafkaLogError", "MissingCodecError",
    "SCHEMA", "SCHEMA_WITH_HEADERS", "ScanProblem", "UnsupportedFormatError", "compress",
    "decode", "decode_run", "decode_segments", "decompress", "encode", "encode_batches", "encode_partitioned",
    "header_table", "murmur2", "partition_for_keys", "read_batch_header", "record_schema",
    "scan_header_rows", "scan_headers", "scan_runs",
]
