# cython: language_level=3
"""Compiled kernel: Arrow columns -> v2 record batches.

Private to :mod:`spark_kafkalog.format.encode`, which validates and normalises the
columns and hands this module raw Arrow buffers. Three passes over raw buffers, no
per-record Python object: ``prepare`` (timestamps, batch-independent record sizes,
every Arrow offset checked), ``plan`` (cut into batches of at most ``max_batch_bytes``
uncompressed), then write. :class:`PartitionedEncoder` writes every row, in row order,
into its own partition's batches. Record layout: wire.py.
"""
cimport cython
from cpython.bytes cimport (
    PyBytes_AS_STRING,
    PyBytes_FromStringAndSize,
    PyBytes_GET_SIZE,
    _PyBytes_Resize,
)
from cpython.ref cimport PyObject, Py_DECREF, Py_INCREF
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_Resize
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t, INT64_MAX, INT64_MIN
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy

from spark_kafkalog.format._encode_out cimport kl_bytes_reset_hash, kl_copy_field, kl_hint_hugepages

from spark_kafkalog.errors import BadRowError, InternalError, InvalidOptionError
from spark_kafkalog.format._wire cimport (
    ATTR_TIMESTAMP_TYPE,
    LOG_OVERHEAD, MAGIC_POS, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, NO_TIMESTAMP,
    OFFSET_POS,
    SIZE_POS, V2_ATTRIBUTES_POS, V2_BASE_SEQUENCE_POS, V2_BASE_TIMESTAMP_POS, V2_CRC_POS,
    V2_HEADER_SIZE, V2_LAST_OFFSET_DELTA_POS, V2_MAX_TIMESTAMP_POS,
    V2_PARTITION_LEADER_EPOCH_POS, V2_PRODUCER_EPOCH_POS, V2_PRODUCER_ID_POS,
    V2_RECORD_COUNT_POS, wire_layout,
)

from spark_kafkalog.format._checksums cimport kl_crc32c, kl_crc32c_init

#: the layout constants as this module was compiled with them (checked against wire.py)
WIRE_LAYOUT = wire_layout()

#: CRC-32C computed here (_checksums.h: SSE4.2 + PCLMULQDQ); when False, by the caller's
#: function
cdef bint _HWCRC = kl_crc32c_init()
HWCRC = bool(_HWCRC)


def _use_hw_crc(bint on):
    """Test hook: switch the kernel's CRC-32C off (the callers' function is used, as on
    CPUs without SSE4.2/PCLMULQDQ) or back on where the CPU allows. Returns the previous
    setting. Not thread-safe: only for tests."""
    global _HWCRC
    cdef bint before = _HWCRC
    _HWCRC = on and HWCRC
    return before


def crc32c_hw(data, uint32_t value=0):
    """CRC-32C of ``data`` continuing from ``value`` (as ``crc32c.crc32c``) with the
    kernel's code (test hook; InternalError when the CPU lacks
    SSE4.2/PCLMULQDQ)."""
    cdef const uint8_t[::1] v = data
    if not _HWCRC:
        raise InternalError("CRC-32C in the kernel needs SSE4.2 and PCLMULQDQ")
    if v.shape[0] == 0:
        return value
    return kl_crc32c(value, &v[0], v.shape[0])


# The module's parts, in this order (textually one module: one extension, one C unit).
include "_encode_columns.pxi"
include "_encode_output.pxi"
include "_encode_batches.pxi"
include "_encode_partitioned.pxi"
