# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
# distutils: sources = spark_kafkalog/format/_blockcache.c
"""The compiled decode kernel: runs of Kafka record batches -> Arrow buffers.

Use it through :mod:`spark_kafkalog.format.decode`; the names here are the kernel's
entry points (the codec registry also calls ``decompress_framed`` and ``zstd_frames``,
the C framings of ``_framing.h``) and a few test hooks. Every read is bounded by the batch it belongs to and
every allocation by the input size or ``max_decompressed``; errors carry the batch's
byte position (``position_base`` added) and base offset. How it is fast (one pass, the
block cache, the C codec paths) and the measurements: docs/PERFORMANCE.md.
"""
from libc.stdint cimport (
    int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t,
)
from libc.string cimport memcpy, memset
from cpython.buffer cimport PyBUF_READ
from cpython.bytearray cimport (
    PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_Resize,
)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.memoryview cimport PyMemoryView_FromMemory

import pyarrow as pa
from crc32c import crc32c as _crc32c

from spark_kafkalog.errors import (
    CodecError,
    CorruptRecordError,
    InternalError,
    InvalidOptionError,
    KafkaLogError,
    MissingCodecError,
    UnsupportedFormatError,
)
from spark_kafkalog.format.schema import (
    HEADER_TYPE,
    HEADERS_TYPE,
    SCHEMA,
    record_schema,
)
from spark_kafkalog.format.wire import CODEC_NAMES
from spark_kafkalog.format._wire cimport (
    ATTR_CODEC_MASK, ATTR_CONTROL, ATTR_TIMESTAMP_TYPE, ATTR_TRANSACTIONAL, CODEC_LZ4,
    CODEC_NONE, CODEC_SNAPPY, CODEC_ZSTD, HEADER_PEEK, LEGACY_ATTRIBUTES_POS,
    LEGACY_CODEC_MASK, LEGACY_CRC_POS, LEGACY_MAGIC_POS, LEGACY_TIMESTAMP_TYPE, LEGACY_V0_KEY_POS,
    LEGACY_V0_MIN_SIZE, LEGACY_V1_KEY_POS, LEGACY_V1_MIN_SIZE, LEGACY_V1_TIMESTAMP_POS,
    LOG_OVERHEAD, MAGIC_POS, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, NO_TIMESTAMP,
    OFFSET_POS, SIZE_POS, TIMESTAMP_TYPE_CREATE, TIMESTAMP_TYPE_LOG_APPEND,
    TIMESTAMP_TYPE_NONE, V2_ATTRIBUTES_POS, V2_BASE_SEQUENCE_POS, V2_BASE_TIMESTAMP_POS,
    V2_CRC_POS, V2_HEADER_SIZE, V2_LAST_OFFSET_DELTA_POS, V2_MAX_TIMESTAMP_POS,
    V2_MIN_BATCH_LENGTH, V2_MIN_RECORD_SIZE, V2_PARTITION_LEADER_EPOCH_POS,
    V2_PRODUCER_EPOCH_POS, V2_PRODUCER_ID_POS, V2_RECORD_COUNT_POS, wire_layout,
)

from spark_kafkalog.format._checksums cimport (
    kl_crc32, kl_crc32_init, kl_crc32c, kl_crc32c_hw, kl_crc32c_init, kl_xxh32,
)
from spark_kafkalog.format._framing cimport *
from spark_kafkalog.format._bytes cimport *
from spark_kafkalog.format._v2records cimport *
from spark_kafkalog.format._blockcache cimport *


#: the layout constants as this module was compiled with them (checked against wire.py)
WIRE_LAYOUT = wire_layout()


kl_crc32_init()
kl_crc32c_init()

# Arrow types, built once (constructing some, e.g. a timestamp with a time zone, costs
# microseconds per call)
_T_BINARY = SCHEMA.field("key").type
_T_STRING = SCHEMA.field("topic").type
_T_INT32 = SCHEMA.field("partition").type
_T_INT64 = SCHEMA.field("offset").type
_T_TIMESTAMP = SCHEMA.field("timestamp").type
_T_HEADER_KEY = HEADER_TYPE.field("key").type
_T_HEADER_VALUE = HEADER_TYPE.field("value").type

# The module's parts, in this order (each is textually part of this one module: one
# extension, one C translation unit, the names as before). The C they call:
# _bytes.h + _v2records.h (per-record walk), _framing.h (codecs), _checksums.h,
# _blockcache.c (output blocks).
include "_decode_header.pxi"
include "_decode_sink.pxi"
include "_decode_codecs.pxi"
include "_decode_v2.pxi"
include "_decode_legacy.pxi"
include "_decode_buffer.pxi"
include "_decode_scan.pxi"
include "_decode_hooks.pxi"
include "_decode_segments.pxi"
